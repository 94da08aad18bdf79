"""A killed quantisation's ``.part`` file: listed by ``models partials``, deleted by
``--discard``, while the file of a run still going is kept (issue 14.9)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest

from backend.entrypoints.main import main
from backend.hub.library import ModelLibrary
from tests.quantize.test_cancel import _processes_writing, _start_cli, _wait_for_tensor

MODEL = "SmolLM2-135M-Instruct"


def _killed_mid_way(source: Path, out: Path, qtype: str) -> Path:
    """Start a quantisation into ``out``, SIGKILL it mid-way; its ``.part`` file."""
    proc = _start_cli(source, out, qtype=qtype)
    _wait_for_tensor(proc)
    part = out / f"{MODEL}-{qtype}.gguf.part"
    proc.kill()  # no chance to clean up, as with the OOM killer or a power cut
    proc.wait(10)
    deadline = time.monotonic() + 5  # the worker follows its parent (PR_SET_PDEATHSIG)
    while _processes_writing(part) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_writing(part) == []
    return part


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_a_killed_runs_leftover_is_listed_and_discarded_but_a_live_run_is_kept(
    smollm2_f16: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    library = ModelLibrary().root
    leftover = _killed_mid_way(smollm2_f16, library, "Q6_K")
    assert leftover.is_file() and leftover.stat().st_size > 0
    assert main(["models", "partials"]) == 0
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if str(leftover) in line]
    assert "died" in line
    assert "1 unfinished quantisation output(s)" in out

    live = _start_cli(smollm2_f16, library)  # the slowest type: it runs for seconds
    live_part = library / f"{MODEL}-Q4_K_M.gguf.part"
    try:
        _wait_for_tensor(live)
        assert main(["models", "partials"]) == 0
        out = capsys.readouterr().out
        [line] = [line for line in out.splitlines() if str(live_part) in line]
        assert "being written" in line
        assert "2 unfinished quantisation output(s)" in out

        assert main(["models", "partials", "--discard"]) == 0
        out = capsys.readouterr().out
        assert f"deleted {leftover}" in out and f"deleted {live_part}" not in out
        assert f"kept {live_part.name}" in out
        assert not leftover.exists()
        assert live_part.is_file() and live.poll() is None
    finally:
        live.send_signal(signal.SIGTERM)
        live.communicate(timeout=30)
    assert live.returncode == 130  # the live run went on until cancelled, unharmed
    assert not live_part.exists()
    assert sorted(p.name for p in library.iterdir()) == []  # no lock files left either


def test_a_new_run_refuses_an_output_a_live_run_writes(smollm2_f16: Path, tmp_path: Path) -> None:
    first = _start_cli(smollm2_f16, tmp_path)
    try:
        _wait_for_tensor(first)
        second = _start_cli(smollm2_f16, tmp_path)
        _, err = second.communicate(timeout=60)
        assert second.returncode != 0
        assert "being written by another quantisation" in err
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert first.returncode == 130
