"""The byte loop of one download: an HTTP GET streamed into the file's ``.part``, resumed
with a Range request from the bytes already there, again after a dropped connection, with
progress reported as it goes and a cancel checked between chunks."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import constants
from huggingface_hub.utils import get_session, hf_raise_for_status

from backend.core.units import human_bytes
from backend.hub.download_progress import (
    DownloadProgress,
    DownloadStage,
    ProgressCallback,
    RateMeter,
)
from backend.hub.errors import DownloadCancelledError, DownloadError, HubConnectionError
from backend.hub.hub_errors import hub_errors
from backend.hub.hub_search import HubFile
from backend.hub.hub_settings import HubSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileTransfer:
    """One file on its way from the Hub to its ``.part`` file."""

    repo_id: str
    hub_file: HubFile
    url: str
    headers: dict[str, str]
    part: Path
    size: int | None
    file_index: int
    file_count: int
    settings: HubSettings
    cancel: threading.Event
    progress: ProgressCallback | None

    def report(self, stage: DownloadStage, done: int, total: int | None, speed: float) -> None:
        """Tell the progress callback, if any, where this file stands."""
        if self.progress is None:
            return
        eta = (total - done) / speed if total is not None and speed > 0 else None
        self.progress(
            DownloadProgress(
                self.repo_id,
                self.hub_file.path,
                stage,
                done,
                total,
                speed,
                eta,
                self.file_index,
                self.file_count,
            )
        )

    def stream_resuming(self, have: int) -> None:
        """:meth:`stream`, resumed after a dropped connection: at once while each try
        brings bytes, else after a doubling wait, up to ``download_retries`` fruitless tries."""
        fruitless = 0
        while True:
            try:
                self.stream(have)
                return
            except HubConnectionError as exc:
                got = self.part.stat().st_size if self.part.exists() else 0
                fruitless = 0 if got > have else fruitless + 1
                have = got
                if fruitless > self.settings.download_retries or self.cancel.is_set():
                    raise DownloadError(
                        f"{self.hub_file.path}: download interrupted at {human_bytes(got)} "
                        f"({exc}); run it again to resume"
                    ) from exc
                delay = self.settings.retry_delay_s * (2 ** (fruitless - 1)) if fruitless else 0
                log.warning(
                    "%s: connection lost at %s (%s); resuming in %.1f s",
                    self.hub_file.path,
                    human_bytes(got),
                    exc,
                    delay,
                )
                if self.cancel.wait(delay):
                    raise DownloadCancelledError(
                        f"download of {self.hub_file.path} cancelled; run it again to resume "
                        f"from {human_bytes(got)}"
                    ) from exc

    def stream(self, have: int) -> None:
        """Append the bytes after the first ``have`` to the ``.part`` file (all of them
        again when the server ignores the Range request)."""
        hub_file, part, size = self.hub_file, self.part, self.size
        if size is not None and have == size:
            return  # complete but not yet verified (e.g. killed while hashing)
        request_headers = dict(self.headers)
        request_headers["Accept-Encoding"] = "identity"
        if have:
            request_headers["Range"] = f"bytes={have}-"
            log.info("resuming %s at byte %d", hub_file.path, have)
        meter = RateMeter()
        endpoint = self.settings.endpoint()
        chunk_bytes = self.settings.download_chunk_bytes
        with (
            hub_errors(repo_id=self.repo_id, endpoint=endpoint, filename=hub_file.path),
            get_session().stream(
                "GET",
                self.url,
                headers=request_headers,
                timeout=constants.HF_HUB_DOWNLOAD_TIMEOUT,
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
            self.report("downloading", done, size, 0.0)
            with part.open(mode) as fh:
                for chunk in response.iter_bytes(chunk_size=chunk_bytes):
                    if self.cancel.is_set():
                        raise DownloadCancelledError(
                            f"download of {hub_file.path} cancelled; run it again to resume "
                            f"from {human_bytes(done)}"
                        )
                    fh.write(chunk)
                    done += len(chunk)
                    self.report("downloading", done, size, meter.add(done))
