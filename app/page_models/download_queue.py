"""The Models page's download queue: one download runs at a time, a cancelled or failed one
resumes from the bytes already on disk. Plain Python; the page shows it and runs the jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from backend.core.units import human_bytes
from backend.hub.download_progress import DownloadProgress


class DownloadState(StrEnum):
    QUEUED = "queued"
    DOWNLOADING = "downloading"
    VERIFYING = "verifying"
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


RUNNING = (DownloadState.DOWNLOADING, DownloadState.VERIFYING)
ACTIVE = (DownloadState.QUEUED, *RUNNING)
RESUMABLE = (DownloadState.CANCELLED, DownloadState.FAILED)

STATUS = {
    DownloadState.QUEUED: "Queued",
    DownloadState.DOWNLOADING: "Downloading…",
    DownloadState.VERIFYING: "Verifying…",
    DownloadState.DONE: "In the library",
    DownloadState.CANCELLED: "Cancelled: resume continues from the bytes already downloaded",
    DownloadState.FAILED: "Failed",
}


@dataclass(eq=False)
class Download:
    """One queued download and what its row shows."""

    repo_id: str
    filename: str | None  # None: the repo's model files (a safetensors source)
    state: DownloadState = DownloadState.QUEUED
    status: str = STATUS[DownloadState.QUEUED]
    fraction: float = 0.0  # 0..1
    paths: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.repo_id} / {self.filename or 'model files'}"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def action(self) -> str | None:
        """The row's button: ``Cancel`` while active, ``Resume`` after, none once done."""
        if self.state is DownloadState.DONE:
            return None
        return "Cancel" if self.active else "Resume"

    def set_state(self, state: DownloadState, status: str | None = None) -> None:
        self.state = state
        self.status = status or STATUS[state]
        if state is DownloadState.DONE:
            self.fraction = 1.0


def progress_text(p: DownloadProgress) -> str:
    """'12.0 MiB of 98.0 MiB  ·  4.0 MiB/s  ·  0:21 left'."""
    total = human_bytes(p.total_bytes) if p.total_bytes else "?"
    text = f"{human_bytes(p.done_bytes)} of {total}"
    if p.bytes_per_s > 0:
        text += f"  ·  {human_bytes(p.bytes_per_s)}/s"
    if p.eta_s is not None:
        text += f"  ·  {int(p.eta_s) // 60}:{int(p.eta_s) % 60:02d} left"
    return text


class DownloadQueue:
    """The downloads in the order they were asked for."""

    def __init__(self) -> None:
        self.items: list[Download] = []

    @property
    def running(self) -> Download | None:
        return next((d for d in self.items if d.state in RUNNING), None)

    def add(self, repo_id: str, filename: str | None) -> tuple[Download, bool]:
        """Queue a download: ``(it, True)``; an identical unfinished one is reused (and
        resumed if it stopped): ``(that one, False)``."""
        for item in self.items:
            if item.repo_id == repo_id and item.filename == filename:
                if item.state in RESUMABLE:
                    self.resume(item)
                if item.state is not DownloadState.DONE:
                    return item, False
        item = Download(repo_id, filename)
        self.items.append(item)
        return item, True

    def start_next(self) -> Download | None:
        """The next queued download, now marked as starting; ``None`` while one runs."""
        if self.running is not None:
            return None
        item = next((d for d in self.items if d.state is DownloadState.QUEUED), None)
        if item is not None:
            item.set_state(DownloadState.DOWNLOADING, "Starting…")
        return item

    def cancel(self, item: Download) -> bool:
        """Cancel ``item``; True when it is running and its job must be told to stop."""
        if item.state is DownloadState.QUEUED:
            item.set_state(DownloadState.CANCELLED, "Cancelled before it started")
            return False
        if item.state in RUNNING:
            item.status = "Cancelling…"
            return True
        return False

    def resume(self, item: Download) -> None:
        if item.state in RESUMABLE:
            item.set_state(DownloadState.QUEUED, "Queued to resume")

    def remove(self, item: Download) -> bool:
        """Drop a finished, cancelled or failed download from the list; False while active."""
        if item.active or item not in self.items:
            return False
        self.items.remove(item)
        return True

    # -- what the running job reports ------------------------------------------------------
    def progressed(self, item: Download, p: DownloadProgress) -> None:
        if p.fraction is not None:
            item.fraction = p.fraction
        if p.stage == "verifying":
            item.set_state(
                DownloadState.VERIFYING, f"Verifying checksum… {human_bytes(p.done_bytes)}"
            )
        elif p.stage == "downloading":
            item.set_state(DownloadState.DOWNLOADING, progress_text(p))

    def succeeded(self, item: Download, paths: list[str]) -> None:
        item.paths = paths
        names = ", ".join(Path(p).name for p in paths)
        item.set_state(DownloadState.DONE, f"In the library: {names}")

    def cancelled(self, item: Download) -> None:
        item.set_state(DownloadState.CANCELLED)

    def failed(self, item: Download, message: str) -> None:
        item.set_state(DownloadState.FAILED, f"Failed: {message}")
