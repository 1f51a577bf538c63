# The probe runtime: a CUDA runtime base, Python, uv, a non-root user. Oracles run in it with
# exactly the torch/Triton of the probed commit, which bisector installs into a shared volume
# (environments made once per artifact, hardlinked from uv's cache on the same volume).
#
# BASE_IMAGE defaults to the official CUDA runtime image of the CUDA version the PyTorch profile
# targets (cu128). Tests build it on a local Debian base (docker/make-base.sh), as no registry
# can be reached there.
ARG BASE_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04
FROM ${BASE_IMAGE}
ARG UID=1000
# The CUDA images have no Python; the local base has it already, so nothing is fetched there.
RUN if ! command -v python3 >/dev/null || ! python3 -c "import venv" 2>/dev/null; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi
# uv comes from the build context (the controller's own pinned uv), not from a registry.
COPY uv /usr/local/bin/uv
RUN (getent passwd ${UID} >/dev/null || useradd -m -u ${UID} -s /bin/bash bisector) \
    && mkdir -p /data /oracle /run-dir /wheels && chown ${UID} /run-dir
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 UV_LINK_MODE=hardlink
LABEL org.opencontainers.image.title="bisector runtime" bisector.role="runtime"
USER ${UID}
WORKDIR /run-dir
CMD ["python3", "--version"]
