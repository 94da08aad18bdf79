"""Downloads from the Hub stand-in: progress, resume after kill, checksum, auth, disk space."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.entrypoints.main import main
from backend.hub import download_checks, download_manager
from backend.hub.download_manager import DownloadManager, pull
from backend.hub.download_progress import DownloadProgress
from backend.hub.errors import (
    ChecksumMismatchError,
    DiskSpaceError,
    DownloadCancelledError,
    DownloadError,
    HubAccessError,
    HubNotFoundError,
)
from backend.hub.hub_settings import HubSettings
from backend.jobs.events import ErrorEvent, ProgressEvent, ResultEvent, parse_event
from tests.hub.conftest import (
    CORRUPT_REPO,
    GATED_REPO,
    GGUF_FILE,
    GGUF_REPO,
    GRANTED_TOKEN,
    PRIVATE_REPO,
    SPLIT_FILES,
    SPLIT_REPO,
    ST_REPO,
)
from tests.hub.hub_stand_in import HubStandIn

ROOT = Path(__file__).resolve().parents[2]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _library(home: Path) -> Path:
    return home / "models"


def _blob_gets(hub: HubStandIn) -> list[str]:
    """Range headers of the GETs that fetched file bytes (LFS files are served from /_cdn/)."""
    return [
        r.headers.get("range", "")
        for r in hub.requests
        if r.method == "GET" and r.path.startswith("/_cdn/")
    ]


@contextlib.contextmanager
def _lock_held_elsewhere(part: Path) -> Iterator[None]:
    """Another process (as a second QuantDesk window would) holds ``part``'s download lock."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock; "
            "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); "
            "time.sleep(60)",
            f"{part}.lock",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def _stop_a_third_in(size: int) -> tuple[threading.Event, Callable[[DownloadProgress], None]]:
    """A cancel event, and a progress callback that sets it a third of the way through."""
    cancel = threading.Event()

    def stop_midway(p: DownloadProgress) -> None:
        if p.done_bytes > size // 3:
            cancel.set()

    return cancel, stop_midway


def _all_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_pull_gguf_reports_progress_and_verifies(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path
) -> None:
    events: list[DownloadProgress] = []
    [path] = pull(GGUF_REPO, progress=events.append)
    assert path == _library(isolated_home) / "test-org--SmolLM2-135M-Instruct-GGUF" / GGUF_FILE
    assert _sha256(path) == _sha256(smollm2_path)
    downloading = [e for e in events if e.stage == "downloading"]
    done = [e.done_bytes for e in downloading]
    assert done == sorted(done) and done[-1] == smollm2_path.stat().st_size
    assert all(e.total_bytes == smollm2_path.stat().st_size for e in events)
    assert any(e.bytes_per_s > 0 and e.eta_s is not None for e in downloading[1:])
    assert [e.stage for e in events[-2:]] == ["verifying", "done"]
    # nothing left in the partial-download area
    assert _all_files(_library(isolated_home) / ".downloads") == []
    # pulling again is a no-op: no new GET for the file
    hub.requests.clear()
    assert pull(GGUF_REPO) == [path]
    assert _blob_gets(hub) == []


def test_pull_safetensors_source_fetches_conversion_files(
    hub: HubStandIn, isolated_home: Path
) -> None:
    paths = pull(ST_REPO)
    names = sorted(p.name for p in paths)
    assert names == ["config.json", "model.safetensors", "tokenizer_config.json"]
    folder = _library(isolated_home) / "test-org--tiny-llama-safetensors"
    record = json.loads((folder / ".quantdesk-source.json").read_text())
    assert record["repo_id"] == ST_REPO and set(record["files"]) == set(names)
    served = hub.repos[ST_REPO].file("config.json")
    assert served is not None and (folder / "config.json").read_bytes() == served.data


def test_cancel_keeps_partial_and_resume_uses_range(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path
) -> None:
    size = smollm2_path.stat().st_size
    cancel, stop_midway = _stop_a_third_in(size)

    with pytest.raises(DownloadCancelledError, match="resume"):
        pull(GGUF_REPO, progress=stop_midway, cancel=cancel)
    [part] = _all_files(_library(isolated_home) / ".downloads")
    have = part.stat().st_size
    assert 0 < have < size
    assert not (
        _library(isolated_home) / "test-org--SmolLM2-135M-Instruct-GGUF" / GGUF_FILE
    ).exists()

    hub.requests.clear()
    [path] = pull(GGUF_REPO)
    assert _blob_gets(hub) == [f"bytes={have}-"]
    assert _sha256(path) == _sha256(smollm2_path)


def test_resume_after_the_process_is_killed(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path
) -> None:
    size = smollm2_path.stat().st_size
    hub.throttle_s_per_chunk = 0.02  # ~12 MB/s: slow enough to kill mid-file
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "QUANTDESK_HOME": str(isolated_home),
        "PYTHONPATH": str(ROOT),
    }
    code = f"from backend.hub.download_manager import pull; pull({GGUF_REPO!r}, [{GGUF_FILE!r}])"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT)
    partial_dir = _library(isolated_home) / ".downloads"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            parts = [p for p in _all_files(partial_dir) if p.suffix == ".part"]
            if parts and parts[0].stat().st_size > size // 4:
                break
            assert proc.poll() is None, "download finished or failed before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the download never got a quarter of the way")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # the killed process leaves its lock file: the kernel released the lock itself
    [part] = [p for p in _all_files(partial_dir) if p.suffix == ".part"]
    have = part.stat().st_size
    assert 0 < have < size

    hub.throttle_s_per_chunk = 0.0
    hub.requests.clear()
    [path] = pull(GGUF_REPO, [GGUF_FILE])
    assert _blob_gets(hub) == [f"bytes={have}-"]
    assert _sha256(path) == _sha256(smollm2_path)
    assert _all_files(partial_dir) == []


def test_a_dropped_connection_resumes_by_itself(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path
) -> None:
    """Flaky Wi-Fi: every connection breaks after 30 MB; each break resumes at once from
    the bytes already on disk, with no click needed."""
    hub.requests.clear()
    hub.drop_after_bytes = 30 << 20
    [path] = pull(GGUF_REPO)
    gets = _blob_gets(hub)
    starts = [int(r.removeprefix("bytes=").rstrip("-") or 0) for r in gets]
    size = smollm2_path.stat().st_size
    assert len(gets) == -(-size // (30 << 20))  # one GET per 30 MB, none wasted
    assert starts == [i * (30 << 20) for i in range(len(gets))]
    assert _sha256(path) == _sha256(smollm2_path)


def test_a_connection_that_brings_nothing_gives_up_and_resumes_later(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTDESK_DOWNLOAD_RETRIES", "2")
    monkeypatch.setenv("QUANTDESK_RETRY_DELAY_S", "0.01")
    hub.requests.clear()
    hub.drop_after_bytes = 0  # every try breaks before a byte arrives
    with pytest.raises(DownloadError, match=r"interrupted at .* run it again to resume"):
        pull(GGUF_REPO)
    assert len(_blob_gets(hub)) == 1 + 2  # the first try and two retries
    hub.drop_after_bytes = None
    hub.requests.clear()
    [path] = pull(GGUF_REPO)
    assert _sha256(path) == _sha256(smollm2_path)


def test_checksum_mismatch_leaves_nothing_in_library(hub: HubStandIn, isolated_home: Path) -> None:
    with pytest.raises(ChecksumMismatchError, match=r"SHA-256 mismatch.*nothing was added"):
        pull(CORRUPT_REPO)
    assert _all_files(_library(isolated_home)) == []


def test_gated_repo_without_token_says_accept_licence_and_login(hub: HubStandIn) -> None:
    with pytest.raises(HubAccessError) as info:
        pull(GATED_REPO)
    message = str(info.value)
    assert "gated" in message and "accept its licence" in message
    assert "HF_TOKEN" in message and "hf auth login" in message
    assert f"{hub.url}/{GATED_REPO}" in message


def test_gated_repo_with_unapproved_token_is_403(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_someone_else")
    with pytest.raises(HubAccessError, match="not been granted access"):
        pull(GATED_REPO)
    assert any(r.headers.get("authorization") == "Bearer hf_someone_else" for r in hub.requests)


def test_gated_repo_with_granted_token_downloads(hub: HubStandIn, isolated_home: Path) -> None:
    settings = HubSettings.model_validate({"hf_token": GRANTED_TOKEN})
    [path] = pull(GATED_REPO, settings=settings)
    assert path.is_file() and path.parent.name == "gated-org--Gated-Model-GGUF"


def test_missing_repo_file_and_private_repo_are_not_found(hub: HubStandIn) -> None:
    with pytest.raises(HubNotFoundError, match="repository nobody/nothing not found"):
        pull("nobody/nothing")
    with pytest.raises(HubNotFoundError, match=r"file not found on the Hub: .*missing.gguf"):
        pull(GGUF_REPO, ["missing.gguf"])
    with pytest.raises(HubNotFoundError, match="if it is private, set HF_TOKEN"):
        pull(PRIVATE_REPO)


def test_full_disk_is_refused_before_downloading(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    real = shutil.disk_usage

    def nearly_full(path: Any) -> Any:
        usage = real(path)
        return usage._replace(free=10 << 20)

    monkeypatch.setattr(download_checks.shutil, "disk_usage", nearly_full)
    with pytest.raises(DiskSpaceError, match=r"needs \d+\.\d MiB, only 10\.0 MiB free"):
        pull(GGUF_REPO)
    assert _blob_gets(hub) == []
    assert _all_files(_library(isolated_home)) == []


def test_cli_pull_draws_progress_on_stderr(
    hub: HubStandIn, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    assert main(["models", "pull", GGUF_REPO, GGUF_FILE]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip().endswith(GGUF_FILE)
    assert "100.0%" in captured.err and "[1/1]" in captured.err and "done" in captured.err


def test_cli_pull_progress_jsonl_and_error(
    hub: HubStandIn, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "pull", ST_REPO, "config.json", "--progress-jsonl"]) == 0
    events = [parse_event(line) for line in capsys.readouterr().out.splitlines()]
    progress, result = events[:-1], events[-1]
    assert progress and all(isinstance(e, ProgressEvent) for e in progress)
    assert all(e.phase == 0 and e.phases == 1 for e in progress)  # one file, one phase
    assert isinstance(result, ResultEvent) and result.payload["paths"][0].endswith("config.json")
    assert main(["models", "pull", GATED_REPO, "--progress-jsonl"]) == 4
    captured = capsys.readouterr()
    error = parse_event(captured.out.splitlines()[-1])
    assert isinstance(error, ErrorEvent) and error.exit_code == 4
    assert "gated" in error.message and "gated" in captured.err


def test_download_manager_target_paths_reject_escapes(isolated_home: Path) -> None:
    manager = DownloadManager()
    with pytest.raises(download_manager.DownloadError, match="unsafe"):
        manager.target_path("a/b", "../../etc/passwd")


def test_a_split_gguf_comes_whole_from_its_first_part(hub: HubStandIn, isolated_home: Path) -> None:
    """Picking part 1 of a model split in three (or naming no file) pulls all three."""
    paths = pull(SPLIT_REPO, [SPLIT_FILES[0]])
    assert [p.name for p in paths] == SPLIT_FILES
    for path in paths:
        served = hub.repos[SPLIT_REPO].file(path.name)
        assert served is not None and path.read_bytes() == served.data
    assert [p.name for p in pull(SPLIT_REPO)] == SPLIT_FILES


def test_cancel_while_verifying_keeps_the_complete_file_for_the_next_run(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path
) -> None:
    cancel = threading.Event()

    def stop_when_verifying(p: DownloadProgress) -> None:
        if p.stage == "verifying":
            cancel.set()

    with pytest.raises(DownloadCancelledError, match="verifying"):
        pull(GGUF_REPO, progress=stop_when_verifying, cancel=cancel)
    target = _library(isolated_home) / "test-org--SmolLM2-135M-Instruct-GGUF" / GGUF_FILE
    assert not target.exists()
    [part] = [p for p in _all_files(_library(isolated_home) / ".downloads") if p.suffix == ".part"]
    assert part.stat().st_size == smollm2_path.stat().st_size
    hub.requests.clear()
    [path] = pull(GGUF_REPO)
    assert _blob_gets(hub) == []  # nothing downloaded again: only verified
    assert _sha256(path) == _sha256(smollm2_path)


def test_a_file_another_process_is_downloading_is_refused_not_corrupted(
    hub: HubStandIn, isolated_home: Path
) -> None:
    """The Models page and a Quantize job (a child process) pulling the same file."""
    manager = DownloadManager()
    listing = download_manager.list_repo_files(GGUF_REPO, settings=manager.settings)
    hub_file = listing.file(GGUF_FILE)
    assert hub_file is not None
    part = manager.partial_path(GGUF_REPO, hub_file)
    part.parent.mkdir(parents=True, exist_ok=True)
    with _lock_held_elsewhere(part):
        with pytest.raises(DownloadError, match="being downloaded by another"):
            pull(GGUF_REPO)
        assert not part.exists()  # nothing was written next to the other writer
    [path] = pull(GGUF_REPO)  # the lock went with the process
    assert path.is_file()


def test_unfinished_downloads_are_listed_and_discarded_unless_in_use(
    hub: HubStandIn, smollm2_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = smollm2_path.stat().st_size
    cancel, stop_midway = _stop_a_third_in(size)

    with pytest.raises(DownloadCancelledError):
        pull(GGUF_REPO, progress=stop_midway, cancel=cancel)
    at_once = threading.Event()
    at_once.set()  # a second download, stopped at its first chunk
    with pytest.raises(DownloadCancelledError):
        pull(SPLIT_REPO, [SPLIT_FILES[1]], cancel=at_once)
    manager = DownloadManager()
    parts = manager.partial_downloads()
    assert len(parts) == 2 and parts[0][1] > parts[1][1]  # largest first
    assert main(["models", "partials"]) == 0
    listed = capsys.readouterr().out
    assert "2 unfinished download(s)" in listed and GGUF_FILE in listed

    in_use = parts[1][0]  # another process is writing this one: it stays
    with _lock_held_elsewhere(in_use):
        assert main(["models", "partials", "--discard"]) == 0
    out = capsys.readouterr().out
    assert f"deleted {parts[0][0]}" in out and "freed" in out
    assert not parts[0][0].exists() and in_use.exists()
    assert [p for p, _ in manager.partial_downloads()] == [in_use]
