"""The ``quantdesk`` command: one place where exceptions become exit codes.

Each sub-command lives in its own ``*_cmd.py`` module exposing
``register(subparsers)``; the handler it sets returns an exit code.
With no sub-command, the desktop app starts.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

from backend.core.errors import QuantDeskError
from backend.jobs.errors import JobCancelledError

log = logging.getLogger("quantdesk")

# Sub-command modules, in the order they appear in --help.
COMMAND_MODULES = (
    "backend.entrypoints.serve_cmd",
    "backend.entrypoints.models_cmd",
    "backend.entrypoints.quantize_cmd",
    "backend.entrypoints.compare_cmd",
    "backend.entrypoints.bench_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quantdesk",
        description="Serve, quantise and compare quantised LLMs locally. "
        "Run without a command to open the desktop app.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # feature not built into this install
        module.register(sub)
    return parser


def _run_gui() -> int:
    from app.main import main as gui_main  # the GUI is one client of this back end

    return gui_main()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    try:
        if handler is None:
            return _run_gui()
        return handler(args)
    except QuantDeskError as exc:
        sys.stderr.write(f"quantdesk: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("quantdesk: interrupted\n")
        return JobCancelledError.exit_code


if __name__ == "__main__":
    sys.exit(main())
