"""Entry point of the frozen (PyInstaller) ``quantdesk`` executable.

The bundle has one executable that is both the desktop app and the CLI:
``quantdesk`` opens the window, ``quantdesk serve ...`` runs the server (the GUI
starts its server child this way). Child processes that a venv starts with
``python -m MODULE ...`` (the quantiser worker, the child guard) reach the same
executable as ``quantdesk -m MODULE ...``; that form is handled here.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import runpy
import sys


def _run_module(argv: list[str]) -> int:
    """``-m MODULE ARGS...``: run MODULE as ``__main__`` with ``sys.argv = [MODULE, *ARGS]``."""
    module = argv[0]
    sys.argv = [module, *argv[1:]]
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        found = False
    if not found:
        sys.stderr.write(f"quantdesk: error: {module} is not part of this bundle\n")
        return 2
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    return 0


def main() -> int:
    multiprocessing.freeze_support()  # harmless when nothing spawns; required if anything does
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "-m":
        return _run_module(args[1:])
    from backend.entrypoints.main import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
