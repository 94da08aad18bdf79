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
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from backend.core.units import human_bytes
from backend.gguf_file.split_gguf import split_part_names
from backend.hub.download_checks import check_disk_space, verify_download
from backend.hub.download_progress import (
    DownloadProgress,
    DownloadStage,
    ProgressCallback,
    RateMeter,
)
from backend.hub.errors import (
    DownloadCancelledError,
    DownloadError,
    HubConnectionError,
    HubNotFoundError,
)
from backend.hub.hub_errors import hub_errors
from backend.hub.hub_search import HubFile, RepoListing, list_repo_files
from backend.hub.hub_settings import HubSettings
from backend.hub.writer_lock import sole_writer

log = logging.getLogger(__name__)

PARTIAL_DIR = ".downloads"
SOURCE_FILE = ".quantdesk-source.json"
# What the quantiser and the converter write before renaming it into the library
# (quantize.output_files.part_path); they hold sole_writer() on it while they do.
OUTPUT_PART_GLOB = "*.gguf.part"


def repo_folder_name(repo_id: str) -> str:
    """``owner/name`` -> ``owner--name`` (one folder per repo in the library)."""
    return repo_id.replace("/", "--")


def _safe_relative(filename: str) -> Path:
    rel = Path(filename)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise DownloadError(f"refusing unsafe file name from the Hub: {filename!r}")
    return rel


@dataclass(frozen=True)
class _Transfer:
    """One file on its way from the Hub to its ``.part`` file."""

    repo_id: str
    hub_file: HubFile
    url: str
    headers: dict[str, str]
    part: Path
    size: int | None
    file_index: int
    file_count: int


def _discard_unwritten(parts: list[Path], busy: str) -> list[tuple[Path, int]]:
    """Delete each of ``parts`` that no process is writing (it holds the writer lock
    otherwise); returns what went, with sizes."""
    removed = []
    for part in parts:
        with sole_writer(part) as sole:
            if not sole:
                log.info("%s %s; kept", part, busy)
                continue
            with contextlib.suppress(FileNotFoundError):
                size = part.stat().st_size
                part.unlink()
                removed.append((part, size))
    return removed


@dataclass(frozen=True)
class UnfinishedOutput:
    """A quantisation or conversion output not yet renamed into the library."""

    path: Path
    size: int
    in_use: bool  # a live run is writing it; False: left by a run that died


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
        return self.library / repo_folder_name(repo_id) / _safe_relative(filename)

    def partial_path(self, repo_id: str, hub_file: HubFile) -> Path:
        tag = (hub_file.sha256 or hub_file.blob_id or "nohash")[:16]
        rel = _safe_relative(hub_file.path)
        return self.library / PARTIAL_DIR / repo_folder_name(repo_id) / f"{rel}.{tag}.part"

    # --- unfinished downloads ----------------------------------------------------------------
    def partial_downloads(self) -> list[tuple[Path, int]]:
        """Unfinished downloads (``.part`` files) and their sizes, largest first: a cancelled
        download left for later, or one whose file changed on the Hub since."""
        folder = self.library / PARTIAL_DIR
        parts = [(p, p.stat().st_size) for p in folder.rglob("*.part") if p.is_file()]
        return sorted(parts, key=lambda item: -item[1])

    def discard_partial_downloads(self) -> list[tuple[Path, int]]:
        """Delete the unfinished downloads no process is writing; returns what went."""
        removed = _discard_unwritten(
            [part for part, _ in self.partial_downloads()], "is being downloaded"
        )
        for folder in sorted((self.library / PARTIAL_DIR).glob("**/"), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only empty ones go
        return removed

    def _output_parts(self) -> list[Path]:
        return [
            p
            for p in self.library.rglob(OUTPUT_PART_GLOB)
            if p.relative_to(self.library).parts[0] != PARTIAL_DIR and p.is_file()
        ]

    def unfinished_outputs(self) -> list[UnfinishedOutput]:
        """Quantisation and conversion outputs in the library that were never finished
        (``<name>.gguf.part``), largest first: those a run is writing now, and those a
        killed or crashed run left behind."""
        found = []
        for part in self._output_parts():
            with sole_writer(part) as sole, contextlib.suppress(FileNotFoundError):
                found.append(UnfinishedOutput(part, part.stat().st_size, in_use=not sole))
        return sorted(found, key=lambda o: -o.size)

    def discard_unfinished_outputs(self) -> list[tuple[Path, int]]:
        """Delete the unfinished outputs of runs that died; returns what went."""
        return _discard_unwritten(
            self._output_parts(), "is being written by a running quantisation"
        )

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
        files = self._choose(listing, filenames)
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
        self._write_source(listing, files)
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
        transfer = _Transfer(
            repo_id, hub_file, location, headers, part, size, file_index, file_count
        )
        with sole_writer(part) as sole:
            if not sole:
                raise DownloadError(
                    f"{hub_file.path} is being downloaded by another QuantDesk window or "
                    "command; wait for it to finish (this one would corrupt it)"
                )
            return self._fetch(transfer, target)

    def _fetch(self, t: _Transfer, target: Path) -> Path:
        """Stream (resuming), verify and move one file into the library; the caller holds
        the file's lock."""
        repo_id, hub_file, part, size = t.repo_id, t.hub_file, t.part, t.size
        file_index, file_count = t.file_index, t.file_count
        if self._already_done(repo_id, hub_file):  # another process finished it meanwhile
            return target
        have = part.stat().st_size if part.exists() else 0
        if size is not None and have > size:
            log.warning("%s is larger than the file on the Hub; starting again", part)
            part.unlink()
            have = 0
        if size is not None:
            check_disk_space(self.library, size - have, hub_file.path)

        self._stream_resuming(t, have)
        done = part.stat().st_size
        if size is not None and done != size:
            raise DownloadError(
                f"{hub_file.path}: got {done} bytes, expected {size}; "
                "run the download again to resume"
            )

        def hashing(hashed: int) -> None:
            if self.cancel.is_set():  # the complete file stays; the next run only verifies
                raise DownloadCancelledError(f"verifying {hub_file.path} cancelled")
            self._report(repo_id, hub_file, "verifying", hashed, done, 0.0, file_index, file_count)

        hashing(0)
        verify_download(part, hub_file, hashing)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
        self._report(repo_id, hub_file, "done", done, size, 0.0, file_index, file_count)
        log.info("downloaded %s/%s to %s", repo_id, hub_file.path, target)
        return target

    # --- internals -------------------------------------------------------------------------
    def _stream_resuming(self, t: _Transfer, have: int) -> None:
        """:meth:`_stream`, resumed after a dropped connection: at once while each try
        brings bytes, else after a doubling wait, up to ``download_retries`` fruitless tries."""
        fruitless = 0
        while True:
            try:
                self._stream(t, have)
                return
            except HubConnectionError as exc:
                got = t.part.stat().st_size if t.part.exists() else 0
                fruitless = 0 if got > have else fruitless + 1
                have = got
                if fruitless > self.settings.download_retries or self.cancel.is_set():
                    raise DownloadError(
                        f"{t.hub_file.path}: download interrupted at {human_bytes(got)} ({exc}); "
                        "run it again to resume"
                    ) from exc
                delay = self.settings.retry_delay_s * (2 ** (fruitless - 1)) if fruitless else 0
                log.warning(
                    "%s: connection lost at %s (%s); resuming in %.1f s",
                    t.hub_file.path,
                    human_bytes(got),
                    exc,
                    delay,
                )
                if self.cancel.wait(delay):
                    raise DownloadCancelledError(
                        f"download of {t.hub_file.path} cancelled; run it again to resume "
                        f"from {human_bytes(got)}"
                    ) from exc

    def _stream(self, t: _Transfer, have: int) -> None:
        repo_id, hub_file, url, part, size = t.repo_id, t.hub_file, t.url, t.part, t.size
        file_index, file_count = t.file_index, t.file_count
        if size is not None and have == size:
            return  # complete but not yet verified (e.g. killed while hashing)
        request_headers = dict(t.headers)
        request_headers["Accept-Encoding"] = "identity"
        if have:
            request_headers["Range"] = f"bytes={have}-"
            log.info("resuming %s at byte %d", hub_file.path, have)
        meter = RateMeter()
        endpoint = self.settings.endpoint()
        chunk_bytes = self.settings.download_chunk_bytes
        with (
            hub_errors(repo_id=repo_id, endpoint=endpoint, filename=hub_file.path),
            get_session().stream(
                "GET", url, headers=request_headers, timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT
            ) as response,
        ):
            if response.status_code == 416 and have:
                return  # the server says we already have every byte
            hf_raise_for_status(response)
            mode = "ab"
            if have and response.status_code != 206:
                log.info("server ignored the Range request; downloading %s again", hub_file.path)
                have, mode = 0, "wb"
            done = have
            meter.add(done)
            self._report(repo_id, hub_file, "downloading", done, size, 0.0, file_index, file_count)
            with part.open(mode) as fh:
                for chunk in response.iter_bytes(chunk_size=chunk_bytes):
                    if self.cancel.is_set():
                        raise DownloadCancelledError(
                            f"download of {hub_file.path} cancelled; run it again to resume "
                            f"from {human_bytes(done)}"
                        )
                    fh.write(chunk)
                    done += len(chunk)
                    speed = meter.add(done)
                    self._report(
                        repo_id,
                        hub_file,
                        "downloading",
                        done,
                        size,
                        speed,
                        file_index,
                        file_count,
                    )

    def _report(
        self,
        repo_id: str,
        hub_file: HubFile,
        stage: DownloadStage,
        done: int,
        total: int | None,
        speed: float,
        file_index: int,
        file_count: int,
    ) -> None:
        if self.progress is None:
            return
        eta = (total - done) / speed if total is not None and speed > 0 else None
        self.progress(
            DownloadProgress(
                repo_id, hub_file.path, stage, done, total, speed, eta, file_index, file_count
            )
        )

    def _have(self, repo_id: str, hub_file: HubFile) -> int:
        part = self.partial_path(repo_id, hub_file)
        return part.stat().st_size if part.exists() else 0

    def _already_done(self, repo_id: str, hub_file: HubFile) -> bool:
        target = self.target_path(repo_id, hub_file.path)
        return target.is_file() and (
            hub_file.size is None or target.stat().st_size == hub_file.size
        )

    def _choose(self, listing: RepoListing, filenames: list[str] | None) -> list[HubFile]:
        if filenames:
            chosen: list[HubFile] = []
            for name in filenames:
                hub_file = listing.file(name)
                if hub_file is None:
                    raise HubNotFoundError(
                        f"file not found on the Hub: {listing.repo_id}/{name} (404)"
                    )
                for part in split_siblings(listing, hub_file):  # every part of a split GGUF
                    if part not in chosen:
                        chosen.append(part)
            return _with_projectors(listing, chosen)
        ggufs = listing.gguf_files
        models = {tuple(f.path for f in split_siblings(listing, g)) for g in ggufs}
        if len(models) == 1:
            return _with_projectors(listing, [f for f in ggufs if f.path in next(iter(models))])
        if len(ggufs) > 1:
            names = ", ".join(f.path for f in ggufs)
            raise DownloadError(
                f"{listing.repo_id} has several GGUF files; name the ones to pull: {names}"
            )
        if listing.is_safetensors_source:
            return listing.source_files()
        raise DownloadError(f"{listing.repo_id} has no GGUF or safetensors model files to pull")

    def _write_source(self, listing: RepoListing, files: list[HubFile]) -> None:
        folder = self.library / repo_folder_name(listing.repo_id)
        record_path = folder / SOURCE_FILE
        record: dict[str, Any] = {
            "repo_id": listing.repo_id,
            "revision": listing.revision,
            "files": {},
        }
        if record_path.exists():
            with contextlib.suppress(OSError, ValueError):
                record["files"] = json.loads(record_path.read_text()).get("files", {})
        for f in files:
            record["files"][f.path] = {
                "size": f.size,
                "sha256": f.sha256,
                "revision": listing.revision,
            }
        tmp = record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        os.replace(tmp, record_path)


def _with_projectors(listing: RepoListing, chosen: list[HubFile]) -> list[HubFile]:
    """``chosen`` and, for each model GGUF in it, the projector beside it in the repo (a
    vision model's ``mmproj*.gguf``): the two are downloaded together."""
    out = list(chosen)
    for hub_file in chosen:
        projector = listing.projector_for(hub_file) if hub_file.kind == "gguf" else None
        if projector is not None and projector not in out:
            out.append(projector)
    return out


def split_siblings(listing: RepoListing, hub_file: HubFile) -> list[HubFile]:
    """All parts of the split GGUF ``hub_file`` belongs to (just ``hub_file`` otherwise);
    a model split into ``-0000i-of-0000n.gguf`` files loads only with every part."""
    names = split_part_names(hub_file.path)
    if names == [hub_file.path]:
        return [hub_file]
    parts = [listing.file(n) for n in names]
    missing = [n for n, p in zip(names, parts, strict=True) if p is None]
    if missing:
        raise DownloadError(
            f"{listing.repo_id}: split model {hub_file.path} lacks parts on the Hub: "
            + ", ".join(missing)
        )
    return [p for p in parts if p is not None]


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
