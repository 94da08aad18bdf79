"""Resumable, verified downloads from the Hub into the model library.

A file is streamed into ``<library>/.downloads/<repo>/<file>.<sha>.part``; an
interrupted download (cancel, crash, kill, network loss) resumes from the bytes
already there with an HTTP Range request. When all bytes are in, the file is
checked against the SHA-256 the Hub publishes for LFS files (or the git blob id
of small files) and only then renamed into ``<library>/<owner>--<repo>/``.
A mismatch deletes the partial file, so nothing unverified ever enters the library.

huggingface_hub provides the metadata (``HfApi.model_info``), the URLs
(``hf_hub_url``), the HEAD with redirects (``get_hf_file_metadata``), auth
headers and its HTTP session; the byte loop is ours because ``hf_hub_download``
(2.x) writes to a process-unique temp file that is deleted on failure, so it
cannot resume after a crash, and it neither verifies SHA-256 nor refuses a
download that cannot fit on disk.

The parts, one role each: ``pull_choice`` (which files a pull takes),
``download_transfer`` (the resumable byte loop), ``download_checks`` (checksum, disk
space), ``download_progress`` (progress and rate), ``library_paths`` (where files go)
and ``leftover_files`` (unfinished downloads and outputs). This module runs a pull
through them, one file at a time.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from urllib.parse import urlparse

from huggingface_hub import get_hf_file_metadata, hf_hub_url
from huggingface_hub.utils import build_hf_headers

from backend.core.units import human_bytes
from backend.hub import leftover_files
from backend.hub.download_checks import check_disk_space, verify_download
from backend.hub.download_progress import ProgressCallback
from backend.hub.download_transfer import FileTransfer
from backend.hub.errors import DownloadCancelledError, DownloadError
from backend.hub.hub_errors import hub_errors
from backend.hub.hub_search import HubFile, RepoListing, list_repo_files
from backend.hub.hub_settings import HubSettings
from backend.hub.leftover_files import UnfinishedOutput
from backend.hub.library_paths import (
    PARTIAL_DIR,
    repo_folder_name,
    safe_relative,
    write_source_record,
)
from backend.hub.pull_choice import choose_files
from backend.hub.writer_lock import sole_writer

log = logging.getLogger(__name__)


class DownloadManager:
    """Downloads repo files into the library, one at a time, with progress and cancel."""

    def __init__(
        self,
        settings: HubSettings | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.settings = settings or HubSettings.model_validate({})
        self.library = self.settings.library_dir()
        self.progress = progress
        self.cancel = cancel or threading.Event()

    # --- paths -----------------------------------------------------------------------------
    def target_path(self, repo_id: str, filename: str) -> Path:
        return self.library / repo_folder_name(repo_id) / safe_relative(filename)

    def partial_path(self, repo_id: str, hub_file: HubFile) -> Path:
        tag = (hub_file.sha256 or hub_file.blob_id or "nohash")[:16]
        rel = safe_relative(hub_file.path)
        return self.library / PARTIAL_DIR / repo_folder_name(repo_id) / f"{rel}.{tag}.part"

    # --- unfinished downloads and outputs (see leftover_files) -------------------------------
    def partial_downloads(self) -> list[tuple[Path, int]]:
        return leftover_files.partial_downloads(self.library)

    def discard_partial_downloads(self) -> list[tuple[Path, int]]:
        return leftover_files.discard_partial_downloads(self.library)

    def unfinished_outputs(self) -> list[UnfinishedOutput]:
        return leftover_files.unfinished_outputs(self.library)

    def discard_unfinished_outputs(self) -> list[tuple[Path, int]]:
        return leftover_files.discard_unfinished_outputs(self.library)

    # --- public API --------------------------------------------------------------------------
    def pull(
        self,
        repo_id: str,
        filenames: list[str] | None = None,
        *,
        revision: str | None = None,
    ) -> list[Path]:
        """Download ``filenames`` of ``repo_id`` (default: its one GGUF, or a safetensors source).

        Returns the library paths. Files already in the library and matching the Hub's
        size are skipped.
        """
        listing = list_repo_files(repo_id, revision=revision, settings=self.settings)
        files = choose_files(listing, filenames)
        total = sum(f.size or 0 for f in files)
        missing = sum(
            (f.size or 0) - self._have(repo_id, f)
            for f in files
            if not self._already_done(repo_id, f)
        )
        check_disk_space(self.library, missing, f"{repo_id} ({human_bytes(total)})")
        paths = [
            self.download(listing, f, file_index=i + 1, file_count=len(files))
            for i, f in enumerate(files)
        ]
        write_source_record(self.library, listing, files)
        return paths

    def download(
        self, listing: RepoListing, hub_file: HubFile, *, file_index: int = 1, file_count: int = 1
    ) -> Path:
        """Download one file (resuming a partial one), verify it, move it into the library."""
        repo_id = listing.repo_id
        target = self.target_path(repo_id, hub_file.path)
        if self._already_done(repo_id, hub_file):
            log.info("%s is already in the library", target)
            return target
        endpoint = self.settings.endpoint()
        url = hf_hub_url(repo_id, hub_file.path, revision=listing.revision, endpoint=endpoint)
        headers = build_hf_headers(token=self.settings.token())
        with hub_errors(repo_id=repo_id, endpoint=endpoint, filename=hub_file.path):
            meta = get_hf_file_metadata(url, token=self.settings.token(), endpoint=endpoint)
        size = hub_file.size if hub_file.size is not None else meta.size
        location = meta.location or url
        if urlparse(location).netloc != urlparse(url).netloc:
            headers.pop("authorization", None)  # a signed CDN URL needs no token

        part = self.partial_path(repo_id, hub_file)
        part.parent.mkdir(parents=True, exist_ok=True)
        transfer = FileTransfer(
            repo_id,
            hub_file,
            location,
            headers,
            part,
            size,
            file_index,
            file_count,
            self.settings,
            self.cancel,
            self.progress,
        )
        with sole_writer(part) as sole:
            if not sole:
                raise DownloadError(
                    f"{hub_file.path} is being downloaded by another QuantDesk window or "
                    "command; wait for it to finish (this one would corrupt it)"
                )
            return self._fetch(transfer, target)

    def _fetch(self, t: FileTransfer, target: Path) -> Path:
        """Stream (resuming), verify and move one file into the library; the caller holds
        the file's lock."""
        repo_id, hub_file, part, size = t.repo_id, t.hub_file, t.part, t.size
        if self._already_done(repo_id, hub_file):  # another process finished it meanwhile
            return target
        have = part.stat().st_size if part.exists() else 0
        if size is not None and have > size:
            log.warning("%s is larger than the file on the Hub; starting again", part)
            part.unlink()
            have = 0
        if size is not None:
            check_disk_space(self.library, size - have, hub_file.path)

        t.stream_resuming(have)
        done = part.stat().st_size
        if size is not None and done != size:
            raise DownloadError(
                f"{hub_file.path}: got {done} bytes, expected {size}; "
                "run the download again to resume"
            )

        def hashing(hashed: int) -> None:
            if self.cancel.is_set():  # the complete file stays; the next run only verifies
                raise DownloadCancelledError(f"verifying {hub_file.path} cancelled")
            t.report("verifying", hashed, done, 0.0)

        hashing(0)
        verify_download(part, hub_file, hashing)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
        t.report("done", done, size, 0.0)
        log.info("downloaded %s/%s to %s", repo_id, hub_file.path, target)
        return target

    # --- internals -------------------------------------------------------------------------
    def _have(self, repo_id: str, hub_file: HubFile) -> int:
        part = self.partial_path(repo_id, hub_file)
        return part.stat().st_size if part.exists() else 0

    def _already_done(self, repo_id: str, hub_file: HubFile) -> bool:
        target = self.target_path(repo_id, hub_file.path)
        return target.is_file() and (
            hub_file.size is None or target.stat().st_size == hub_file.size
        )


def pull(
    repo_id: str,
    filenames: list[str] | None = None,
    *,
    revision: str | None = None,
    settings: HubSettings | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> list[Path]:
    """Download files of ``repo_id`` into the library (see :meth:`DownloadManager.pull`)."""
    return DownloadManager(settings, progress=progress, cancel=cancel).pull(
        repo_id, filenames, revision=revision
    )
