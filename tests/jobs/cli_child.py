"""A ``quantdesk`` sub-command in a child process, with pipes, as the GUI's CliJob runs it."""

from __future__ import annotations

import subprocess
import sys


def start_quantdesk(*args: str) -> subprocess.Popen[str]:
    """``python -m backend.entrypoints.main ARGS...`` with stdout and stderr piped (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "backend.entrypoints.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
