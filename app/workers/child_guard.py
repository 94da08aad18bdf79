"""Run a program that dies with its parent (the window):

    python -m app.workers.child_guard PID PROGRAM ARGS...

The window's name for :mod:`backend.core.die_with_parent`, which the router uses for its
model servers too. Imports nothing heavy.
"""

from __future__ import annotations

import sys

from backend.core.die_with_parent import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
