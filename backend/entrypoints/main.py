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
    "backend.entrypoints.worker_cmd",
    "backend.entrypoints.doctor_cmd",
    "backend.entrypoints.chat_cmd",
)


def _command_module(argv: Sequence[str]) -> str | None:
    """The module of the sub-command ``argv`` names (its first word that is not an option),
    or None when it names none of them."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    module = f"backend.entrypoints.{command}_cmd"
    return module if module in COMMAND_MODULES else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command's parser; ``only`` (a module of COMMAND_MODULES) registers that one
    sub-command alone, so ``quantdesk serve`` (a model server the router starts for each
    load) does not import the hub, quantize, compare and bench modules it never uses."""
    parser = argparse.ArgumentParser(
        prog="quantdesk",
        description="Serve, quantise and compare quantised LLMs locally. "
        "Run without a command to open the desktop app.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES if only is None else (only,):
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
    parser = build_parser(_command_module(sys.argv[1:] if argv is None else argv))
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
