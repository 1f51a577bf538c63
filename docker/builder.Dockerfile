# The source builder: a CUDA devel base with PyTorch's build dependencies and ccache.
# Builds run with the commit's exported tree mounted at /src (never the user's working tree),
# a named ccache volume per repository at /ccache, and write the wheel to /out.
#
# BASE_IMAGE defaults to the official CUDA devel image of the profile's CUDA (12.8). Tests
# build it on the local Debian base from docker/make-base.sh (gcc, ccache, python3-dev in it).
ARG BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04
FROM ${BASE_IMAGE}
ARG UID=1000
RUN need=""; for c in python3 gcc g++ ccache git; do command -v $c >/dev/null || need=1; done; \
    python3 -c "import sysconfig, os; assert os.path.exists(sysconfig.get_paths()['include'] + '/Python.h')" 2>/dev/null || need=1; \
    if [ -n "$need" ]; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-dev python3-venv gcc g++ ccache git ninja-build cmake \
        ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi
COPY uv /usr/local/bin/uv
RUN (getent passwd ${UID} >/dev/null || useradd -m -u ${UID} -s /bin/bash bisector) \
    && mkdir -p /src /out /ccache && chown ${UID} /src /out /ccache
# PyTorch's CMake turns USE_CCACHE on by default when ccache is on PATH; the wrappers catch
# plain setuptools extensions (and the synthetic project's) as well.
ENV CCACHE_DIR=/ccache CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 CC="ccache gcc" CXX="ccache g++" \
    CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    CMAKE_CUDA_COMPILER_LAUNCHER=ccache UV_LINK_MODE=copy
LABEL org.opencontainers.image.title="bisector builder" bisector.role="builder"
USER ${UID}
WORKDIR /src
CMD ["ccache", "--version"]
