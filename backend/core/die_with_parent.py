"""Run a program that dies with the process that started it.

    python -m backend.core.die_with_parent PARENT_PID PROGRAM ARGS...

On Linux the process asks the kernel for SIGTERM when its parent goes away
(``PR_SET_PDEATHSIG``, kept across ``exec``), then becomes ``PROGRAM``; elsewhere it simply
becomes ``PROGRAM``. So a server started by the window (``app.workers.child_guard``) or a
model's server started by the router never outlives a parent that crashed or was killed
outright, and its memory comes back. Done here rather than in a ``preexec_fn``, which would
run Python in a fork of a threaded, event-loop-driven process. Imports nothing heavy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python -m backend.core.die_with_parent PID PROGRAM [ARGS...]\n")
        return 2
    parent_pid = int(argv[0])
    program, args = argv[1], argv[1:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            return 1
    os.execv(program, args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
