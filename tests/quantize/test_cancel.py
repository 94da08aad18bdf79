"""Cancel and kill mid-way: nothing is ever left under the final name."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from backend.jobs.events import ErrorEvent
from backend.jobs.progress import Progress
from quantize.errors import QuantizeCancelledError
from quantize.quantizer import quantize_gguf
from tests.jobs.cli_child import cancel_child, start_quantdesk

FINAL = "SmolLM2-135M-Instruct-Q4_K_M.gguf"


def test_cancel_event_terminates_worker(smollm2_f16: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    seen: list[Progress] = []

    def progress(p: Progress) -> None:
        seen.append(p)
        if p.done >= 3:
            cancel.set()

    with pytest.raises(QuantizeCancelledError):
        quantize_gguf(smollm2_f16, "Q4_K_M", tmp_path, threads=1, progress=progress, cancel=cancel)
    assert seen[-1].done < seen[-1].total  # it really stopped mid-way
    assert list(tmp_path.iterdir()) == []  # no final file, no .part, no sidecar


def _start_cli(
    source: Path, out: Path, *extra: str, qtype: str = "Q4_K_M"
) -> subprocess.Popen[str]:
    """``quantdesk quantize`` in a child process, as the GUI runs it."""
    return start_quantdesk(
        "quantize",
        str(source),
        "--type",
        qtype,
        "--out",
        str(out),
        "--threads",
        "1",
        "--progress-jsonl",
        *extra,
    )


def _wait_for_tensor(proc: subprocess.Popen[str], min_done: int = 2) -> dict[str, Any]:
    assert proc.stdout is not None
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("stage") == "quantize" and int(event["done"]) >= min_done:
            return event
    err = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"no quantize progress; stderr: {err}")


def _processes_writing(path: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if str(path).encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_killed_cli_leaves_nothing_under_final_name(smollm2_f16: Path, tmp_path: Path) -> None:
    proc = _start_cli(smollm2_f16, tmp_path)
    event = _wait_for_tensor(proc)
    assert int(event["done"]) < int(event["total"])
    part = tmp_path / (FINAL + ".part")
    workers = _processes_writing(part)
    assert workers, "the quantiser worker should be running"
    proc.kill()  # SIGKILL: no chance to clean up
    proc.wait(10)
    # the worker gets SIGTERM from the kernel when its parent dies (a full run takes ~6 s)
    deadline = time.monotonic() + 3
    while _processes_writing(part) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_writing(part) == [], "the quantiser worker outlived its killed parent"
    assert not (tmp_path / FINAL).exists()
    assert not (tmp_path / (FINAL + ".json")).exists()


def test_sigterm_cancels_cleanly(smollm2_f16: Path, tmp_path: Path) -> None:
    proc = _start_cli(smollm2_f16, tmp_path)
    _wait_for_tensor(proc)
    last, err = cancel_child(proc, signal.SIGTERM)
    assert last == ErrorEvent(
        message="quantisation cancelled", exit_code=130, error_type="QuantizeCancelledError"
    )
    assert "cancelled" in err
    assert list(tmp_path.iterdir()) == []
    assert os.path.exists(smollm2_f16)


def test_cancel_conversion(tiny_hf_model: Path, tmp_path: Path) -> None:
    from quantize.convert import convert_hf_to_gguf

    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.stage == "convert" and p.done >= 1:
            cancel.set()

    with pytest.raises(QuantizeCancelledError, match="conversion cancelled"):
        convert_hf_to_gguf(tiny_hf_model, tmp_path, progress=progress, cancel=cancel)
    assert list(tmp_path.iterdir()) == []
