"""The checks around a download: its checksum once complete, and room on disk before it starts."""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from backend.core.units import human_bytes
from backend.hub.errors import ChecksumMismatchError, DiskSpaceError
from backend.hub.hub_search import HubFile

log = logging.getLogger(__name__)

# Keep this much free beyond the download itself.
DISK_MARGIN_BYTES = 64 << 20

HashProgress = Callable[[int], None]


def hash_file(
    path: Path, algorithm: str, prefix: bytes = b"", progress: HashProgress | None = None
) -> str:
    digest = hashlib.new(algorithm)
    digest.update(prefix)
    done = 0
    with path.open("rb") as fh:
        while chunk := fh.read(8 << 20):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done)
    return digest.hexdigest()


def verify_download(path: Path, hub_file: HubFile, progress: HashProgress | None = None) -> None:
    """Check SHA-256 (LFS files) or the git blob SHA-1 (small files) of a complete file."""
    if hub_file.sha256:
        actual = hash_file(path, "sha256", progress=progress)
        expected = hub_file.sha256.lower()
        algo = "SHA-256"
    elif hub_file.blob_id:
        size = path.stat().st_size
        actual = hash_file(path, "sha1", prefix=f"blob {size}\0".encode(), progress=progress)
        expected = hub_file.blob_id.lower()
        algo = "git blob SHA-1"
    else:
        log.warning("%s: the Hub published no checksum; size checked only", hub_file.path)
        return
    if actual != expected:
        path.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"{hub_file.path}: {algo} mismatch (expected {expected}, got {actual}); "
            "the corrupt download was deleted and nothing was added to the library: "
            "retry the download"
        )


def check_disk_space(folder: Path, needed: int, what: str) -> None:
    """Raise DiskSpaceError when ``folder``'s disk cannot take ``needed`` more bytes."""
    free = shutil.disk_usage(folder).free
    if needed + DISK_MARGIN_BYTES > free:
        raise DiskSpaceError(
            f"not enough free disk space for {what}: it needs {human_bytes(needed)}, "
            f"only {human_bytes(free)} free in {folder}; free some space or point "
            "QUANTDESK_MODELS_DIR at a bigger disk"
        )
