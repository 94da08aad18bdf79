"""Run a program that dies with the router that started it.

    python -m backend.router.die_with_router ROUTER_PID PROGRAM ARGS...

On Linux the process asks the kernel for SIGTERM when its parent goes away
(``PR_SET_PDEATHSIG``, kept across ``exec``), then becomes ``PROGRAM``: a model's server
never outlives a router that was killed outright, so its memory comes back. Done here
rather than in a ``preexec_fn``, which would run Python in a fork of the router's
threaded, event-loop-driven process. Imports nothing heavy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python -m backend.router.die_with_router PID PROGRAM [ARGS...]\n")
        return 2
    parent_pid = int(argv[0])
    program, args = argv[1], argv[1:]
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:  # the router died before prctl took effect
            return 1
    os.execv(program, args)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
