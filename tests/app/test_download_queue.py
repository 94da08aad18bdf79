"""The Models page's download queue, without Qt: one at a time, cancel, resume, remove, and
what each row says."""

from __future__ import annotations

from app.page_models.download_queue import Download, DownloadQueue, DownloadState
from backend.hub.download_progress import DownloadProgress

MIB = 2**20


def _progress(stage: str, done: int, total: int | None = 100 * MIB) -> DownloadProgress:
    return DownloadProgress(
        repo_id="org/repo",
        filename="m.gguf",
        stage=stage,
        done_bytes=done,
        total_bytes=total,
        bytes_per_s=4 * MIB,
        eta_s=75.0,
    )


def test_one_download_runs_at_a_time_in_the_order_asked() -> None:
    queue = DownloadQueue()
    first, new = queue.add("org/a", "a.gguf")
    second, _ = queue.add("org/b", None)
    assert new and second.title == "org/b / model files"
    assert queue.start_next() is first
    assert first.state is DownloadState.DOWNLOADING and first.status == "Starting…"
    assert queue.start_next() is None  # the first still runs
    queue.succeeded(first, ["/lib/org--a/a.gguf"])
    assert first.status == "In the library: a.gguf" and first.fraction == 1.0
    assert first.action is None
    assert queue.start_next() is second


def test_progress_says_bytes_speed_and_time_left_in_iec_units() -> None:
    queue = DownloadQueue()
    item, _ = queue.add("org/repo", "m.gguf")
    queue.start_next()
    queue.progressed(item, _progress("downloading", 25 * MIB))
    assert item.status == "25.0 MiB of 100.0 MiB  ·  4.0 MiB/s  ·  1:15 left"
    assert item.fraction == 0.25
    queue.progressed(item, _progress("verifying", 100 * MIB))
    assert item.state is DownloadState.VERIFYING
    assert item.status == "Verifying checksum… 100.0 MiB"
    unknown = _progress("downloading", 512, total=None)
    queue.progressed(item, unknown)
    assert item.status.startswith("512 B of ?") and item.fraction == 1.0  # kept, not reset


def test_cancel_a_queued_one_at_once_a_running_one_through_its_job() -> None:
    queue = DownloadQueue()
    running, _ = queue.add("org/a", "a.gguf")
    waiting, _ = queue.add("org/b", "b.gguf")
    queue.start_next()
    assert queue.cancel(waiting) is False
    assert waiting.state is DownloadState.CANCELLED
    assert waiting.status == "Cancelled before it started" and waiting.action == "Resume"
    assert queue.cancel(running) is True  # the caller stops the job
    assert running.status == "Cancelling…" and running.state is DownloadState.DOWNLOADING
    queue.cancelled(running)
    assert running.status.startswith("Cancelled: resume continues")
    assert queue.running is None


def test_asking_again_resumes_the_same_download_and_failures_say_why() -> None:
    queue = DownloadQueue()
    item, _ = queue.add("org/a", "a.gguf")
    queue.start_next()
    queue.failed(item, "disk full")
    assert item.status == "Failed: disk full" and item.action == "Resume"
    again, new = queue.add("org/a", "a.gguf")
    assert again is item and not new
    assert item.state is DownloadState.QUEUED and item.status == "Queued to resume"
    queue.start_next()
    queue.succeeded(item, ["/lib/a.gguf"])
    fresh, new = queue.add("org/a", "a.gguf")  # done before: a new download
    assert new and fresh is not item


def test_only_a_stopped_download_can_be_removed() -> None:
    queue = DownloadQueue()
    item, _ = queue.add("org/a", "a.gguf")
    assert not queue.remove(item)
    queue.cancel(item)
    assert queue.remove(item) and queue.items == []
    assert not queue.remove(Download("org/x", None))
