#!/usr/bin/env bash
# Build a local base image with no registry: a minimal Debian rootfs made by
# mmdebstrap (or debootstrap, three times slower) from this machine's own apt
# configuration, then `docker import`.
# It stands in for the official CUDA images (which cannot be pulled here) so
# the production Dockerfiles can be built and tested on this machine.
#
# Usage: docker/make-base.sh [TAG]   (default bisector/base:bookworm)
# Skips all work when the tag already exists (CI caches it that way).
set -euo pipefail
tag="${1:-bisector/base:bookworm}"
if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag exists"
    exit 0
fi
# The mirror and suite come from apt's own configuration: no host is written here.
read -r mirror suite < <(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' \
    | grep -v -e security -e updates -e backports | sort -u | head -n1)
[ -n "${mirror:-}" ] || { echo "error: no Debian source in apt's configuration; fix: configure apt" >&2; exit 1; }
packages=python3,python3-venv,ca-certificates,ccache,gcc,g++,libc6-dev,python3-dev,procps
changes=(--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
         --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]')
if command -v mmdebstrap >/dev/null; then
    # mmdebstrap: apt's parallel downloads and one dpkg run, straight into a tar stream
    # (46 s here against debootstrap's 2.5 min).
    # Its default clean-up drops apt's lists and downloaded packages, as below.
    mmdebstrap --quiet --variant=minbase --include="$packages" "$suite" - "$mirror" \
        | docker import "${changes[@]}" - "$tag"
elif command -v debootstrap >/dev/null; then
    root="$(mktemp -d /tmp/bisector-rootfs.XXXXXX)"
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import "${changes[@]}" - "$tag"
else
    echo "error: neither mmdebstrap nor debootstrap is installed; fix: apt-get install -y mmdebstrap" >&2
    exit 1
fi
echo "built base image $tag"
