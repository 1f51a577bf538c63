"""``make images`` / ``bisect images``: build the runtime and builder images, list what exists
(the images with their digests, and the builder's ccache volumes).

Both Dockerfiles take ``BASE_IMAGE`` as a build argument (default: the official CUDA image of
the profile's CUDA); with no registry, tests pass the local Debian base made by
``docker/make-base.sh``. The build context is a scratch folder holding the Dockerfile and the
controller's own uv binary, so no image step downloads uv from anywhere.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bisector.artifacts.build import uv_binary
from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.base.paths import PACKAGE_DIR
from bisector.infra.containers import client

DOCKER_DIR = PACKAGE_DIR.parent / "docker"
IMAGES = {"runtime": defaults.RUNTIME_IMAGE, "builder": defaults.BUILDER_IMAGE}


@dataclass(frozen=True)
class ImageInfo:
    role: str
    tag: str
    id: str | None
    size: int | None
    created: str | None


def build(role: str, base: str | None, tag: str | None = None) -> ImageInfo:
    dockerfile = DOCKER_DIR / f"{role}.Dockerfile"
    if not dockerfile.exists():
        raise UsageError(f"no {dockerfile}: roles are {', '.join(IMAGES)}")
    c = client()
    with tempfile.TemporaryDirectory(prefix="bisector-ctx-") as ctx:
        shutil.copy(dockerfile, Path(ctx) / "Dockerfile")
        shutil.copy(uv_binary(), Path(ctx) / "uv")
        args = {"BASE_IMAGE": base} if base else {}
        try:
            c.images.build(path=ctx, tag=tag or IMAGES[role], buildargs=args, rm=True,
                           pull=False)
        except Exception as e:  # BuildError / APIError carry the failing step
            raise UsageError(
                f"building the {role} image failed ({str(e)[:300]}): check --base "
                f"(no registry here? make one with docker/make-base.sh)"
            ) from None
    return inspect(role)


def inspect(role: str) -> ImageInfo:
    c = client()
    tag = IMAGES[role]
    try:
        img = c.images.get(tag)
    except Exception:
        return ImageInfo(role, tag, None, None, None)
    return ImageInfo(role, tag, str(img.id), int(img.attrs.get("Size", 0)),
                     str(img.attrs.get("Created", "")))


@dataclass(frozen=True)
class CacheVolume:
    name: str
    repository: str  # the root commit of the repository whose builds share it
    created: str


def ccache_volumes() -> list[CacheVolume]:
    """The builder's compiler caches, one per repository (``--build-in docker``)."""
    vols = client().volumes.list(filters={"label": "bisector.ccache"})
    return sorted((CacheVolume(v.name, str(v.attrs.get("Labels", {}).get("bisector.ccache", "")),
                               str(v.attrs.get("CreatedAt", ""))) for v in vols),
                  key=lambda v: v.name)
