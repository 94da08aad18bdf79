"""A server started through the child guard dies when the window's process dies."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

PARENT = r"""
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-m", "app.workers.child_guard", str(os.getpid()),
                          sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_child_is_terminated_when_the_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    child = psutil.Process(child_pid)
    time.sleep(0.5)  # let the guard exec
    assert child.is_running()
    assert "time.sleep(120)" in " ".join(child.cmdline())  # the guard became the program
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not child.is_running() or child.status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    else:
        child.kill()
        pytest.fail("the child outlived its killed parent")


def test_guard_refuses_when_parent_is_already_gone() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.workers.child_guard",
            "1",
            sys.executable,
            "-c",
            "print('ran')",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if sys.platform.startswith("linux"):
        assert result.returncode == 1 and "ran" not in result.stdout
    else:
        assert "ran" in result.stdout
