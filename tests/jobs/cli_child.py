"""A ``quantdesk`` sub-command in a child process, with pipes, as the GUI's CliJob runs it."""

from __future__ import annotations

import subprocess
import sys

from backend.jobs.events import ErrorEvent, parse_event


def start_quantdesk(*args: str) -> subprocess.Popen[str]:
    """``python -m backend.entrypoints.main ARGS...`` with stdout and stderr piped (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "backend.entrypoints.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def cancel_child(proc: subprocess.Popen[str], signum: int) -> tuple[ErrorEvent, str]:
    """Send ``signum`` to a running job and wait: its last event, checked to be the
    cancelled error (exit 130 on both the event and the process), and its stderr."""
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    last = parse_event(out.strip().splitlines()[-1])
    assert isinstance(last, ErrorEvent) and last.cancelled, last
    return last, err
