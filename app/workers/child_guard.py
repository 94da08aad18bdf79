"""Run a program that dies with its parent.

    python -m app.workers.child_guard PID PROGRAM ARGS...

On Linux the child asks the kernel for SIGTERM when its parent goes away
(``PR_SET_PDEATHSIG``, kept across ``exec``), then becomes ``PROGRAM``. So a
server started by the window never outlives a window that crashed or was
killed. Elsewhere it simply becomes ``PROGRAM``. Imports nothing heavy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python -m app.workers.child_guard PARENT_PID PROGRAM [ARGS...]\n")
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
