"""The CPU probe, its kept verdict and the fallback to ``use_extra_bufts=false``
(issue 28), with stand-in probe children that die on SIGSEGV and SIGILL, as a build whose
repacked kernels fault on this CPU would; and the real probe and both real CPU paths."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.llama import cpu_probe, model_params
from backend.llama.cpu_probe import ensure_verdict, forget_verdict, load_verdict, verdict_key
from backend.llama.model_params import choose_cpu_path

CLI = [sys.executable, "-m", "backend.entrypoints.main"]


def dies_on(sig: signal.Signals) -> list[str]:
    """A probe child that dies on ``sig`` as a faulting kernel would (no Python handler)."""
    n = int(sig)
    code = f"import os, signal; signal.signal({n}, signal.SIG_DFL); os.kill(os.getpid(), {n})"
    return [sys.executable, "-c", code]


@pytest.fixture
def fresh_choice() -> Iterator[None]:
    """No kept verdict for this build and CPU, and no decision cached in this process."""
    forget_verdict()
    choose_cpu_path.cache_clear()
    yield
    choose_cpu_path.cache_clear()


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGILL])
def test_a_probe_child_killed_by_a_signal_turns_repacking_off_and_is_remembered(
    sig: signal.Signals,
    fresh_choice: None,
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    verdict = ensure_verdict(dies_on(sig))
    assert not verdict.extra_bufts_safe and sig.name in verdict.detail
    kept = json.loads((isolated_home / "cpu-probe" / f"{verdict_key()}.json").read_text())
    assert kept["extra_bufts_safe"] is False
    # every later decision on this machine and build reads the verdict, without probing again
    monkeypatch.setattr(cpu_probe, "run_probe", lambda *a, **k: pytest.fail("probed again"))
    monkeypatch.setattr(model_params, "extra_buffer_names", lambda: ("AMX", "CPU_REPACK"))
    with caplog.at_level(logging.WARNING, logger="backend.llama.model_params"):
        choice = choose_cpu_path()
    assert (choice.use_extra_bufts, choice.path) == (False, "plain")
    assert sig.name in choice.reason
    said = [r.getMessage() for r in caplog.records if r.name == "backend.llama.model_params"]
    assert len(said) == 1 and sig.name in said[0] and "use_extra_bufts=false" in said[0]
    assert model_params.model_params().use_extra_bufts is False


def test_the_verdict_reaches_a_new_process_doctor_says_why(
    fresh_choice: None, isolated_home: Path
) -> None:
    ensure_verdict(dies_on(signal.SIGSEGV))
    out = subprocess.run([*CLI, "doctor"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    path_line = next(line for line in out.stdout.splitlines() if line.startswith("CPU path:"))
    as_json = json.loads(
        subprocess.run(
            [*CLI, "doctor", "--json"], capture_output=True, text=True, timeout=120
        ).stdout
    )
    if as_json["extra_buffers"]:  # a build with repacked kernels on this CPU
        assert as_json["use_extra_bufts"] is False and as_json["path"] == "plain"
        assert "SIGSEGV" in as_json["reason"] and "SIGSEGV" in path_line
    else:  # nothing to repack into: the verdict has nothing to turn off
        assert as_json["path"] == "plain" and "no extra CPU buffer types" in path_line


def test_a_passing_probe_keeps_repacking_on(fresh_choice: None) -> None:
    verdict = ensure_verdict([sys.executable, "-c", "pass"])
    assert verdict.extra_bufts_safe and load_verdict() == verdict


@pytest.mark.parametrize(
    ("command", "timeout_s"),
    [
        ([sys.executable, "-c", "raise SystemExit(3)"], 60.0),  # e.g. the model went missing
        ([sys.executable, "-c", "import time; time.sleep(30)"], 1.0),
        (["/nonexistent/python"], 60.0),
    ],
    ids=["exit-code", "timeout", "cannot-start"],
)
def test_an_inconclusive_probe_keeps_repacking_on_and_is_not_remembered(
    command: list[str], timeout_s: float, fresh_choice: None
) -> None:
    verdict = cpu_probe.run_probe(command, verdict_key(), timeout_s=timeout_s)
    assert verdict.extra_bufts_safe
    assert load_verdict() is None  # the next load probes again


def test_a_corrupt_verdict_is_ignored_and_probed_again(
    fresh_choice: None, isolated_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = isolated_home / "cpu-probe" / f"{verdict_key()}.json"
    path.write_text('{"extra_bufts_safe": fal')
    with caplog.at_level(logging.WARNING):
        assert load_verdict() is None
    assert "unreadable CPU probe verdict" in caplog.text
    assert ensure_verdict(dies_on(signal.SIGILL)).extra_bufts_safe is False
    assert json.loads(path.read_text())["extra_bufts_safe"] is False


def test_verdicts_are_kept_per_cpu(fresh_choice: None, monkeypatch: pytest.MonkeyPatch) -> None:
    ensure_verdict(dies_on(signal.SIGSEGV))
    here = verdict_key()
    monkeypatch.setattr(cpu_probe, "_cpu_flags", lambda: "fpu sse2 avx2 amx_tile amx_int8")
    assert verdict_key() != here and load_verdict() is None


def test_no_repack_wins_over_a_passing_verdict(
    fresh_choice: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_verdict([sys.executable, "-c", "pass"])
    monkeypatch.setenv("QUANTDESK_NO_REPACK", "1")
    choice = choose_cpu_path()
    assert (choice.use_extra_bufts, choice.path) == (False, "plain")
    assert "--no-repack" in choice.reason


def test_the_real_probe_passes_on_this_machine() -> None:
    """The session's real probe (tests/conftest.py's cpu_verdicts) on the embedded model:
    with our patched llama.cpp the repacked kernels must not fault on any CPU."""
    verdict = load_verdict()
    assert verdict is not None and verdict.extra_bufts_safe, verdict
    assert verdict.detail == "probe passed"
