"""The evaluation text: a user's file, or a built-in default that needs no network.

The default is **taken from something installed**, not copied prose and not downloaded: the
docstrings of a fixed list of Python standard-library modules, read from the interpreter's
own ``.py`` sources with :mod:`ast` (nothing is imported, so ``python -OO`` does not matter),
in source order, up to ``max_chars`` characters. The text therefore depends only on the
Python version; the run records which one in ``text_source``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import logging
import platform
from dataclasses import dataclass
from pathlib import Path

from backend.compare.errors import EvaluationTextError

log = logging.getLogger(__name__)

# Modules whose docstrings are long, varied English prose about ordinary programming topics.
DEFAULT_TEXT_MODULES = (
    "argparse",
    "collections",
    "contextlib",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "fractions",
    "functools",
    "heapq",
    "inspect",
    "ipaddress",
    "json",
    "logging",
    "pathlib",
    "pickle",
    "queue",
    "random",
    "shutil",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "textwrap",
    "threading",
    "typing",
    "urllib.parse",
    "uuid",
    "zipfile",
)
DEFAULT_MAX_CHARS = 40_000  # about 10k SmolLM2 tokens: 19 chunks of 512


@dataclass(frozen=True)
class EvaluationText:
    """The text to score and a description of where it came from."""

    text: str
    source: str


def _docstrings_in_order(node: ast.AST) -> list[str]:
    found: list[str] = []
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        doc = ast.get_docstring(node, clean=True)
        if doc:
            found.append(doc)
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            found.extend(_docstrings_in_order(child))
    return found


def stdlib_docstring_text(max_chars: int = DEFAULT_MAX_CHARS) -> EvaluationText:
    """Docstrings of :data:`DEFAULT_TEXT_MODULES` from this Python's installed sources."""
    parts: list[str] = []
    size = 0
    for name in DEFAULT_TEXT_MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if not origin or not origin.endswith(".py"):
            continue
        try:
            tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError) as exc:
            log.debug("skipping %s: %s", name, exc)
            continue
        for doc in _docstrings_in_order(tree):
            parts.append(inspect.cleandoc(doc))
            size += len(parts[-1]) + 2
            if size >= max_chars:
                text = "\n\n".join(parts)[:max_chars]
                return EvaluationText(
                    text, f"python-stdlib-docstrings ({platform.python_version()})"
                )
    if size < 1000:
        raise EvaluationTextError(
            "the built-in evaluation text needs Python's standard-library sources; "
            "pass --text FILE instead"
        )
    return EvaluationText(
        "\n\n".join(parts), f"python-stdlib-docstrings ({platform.python_version()})"
    )


def load_text(path: Path | None, max_chars: int = DEFAULT_MAX_CHARS) -> EvaluationText:
    """The user's text file (UTF-8), or the built-in default when ``path`` is None."""
    if path is None:
        return stdlib_docstring_text(max_chars)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise EvaluationTextError(f"cannot read evaluation text {path}: {exc}") from exc
    if not text.strip():
        raise EvaluationTextError(f"evaluation text {path} is empty")
    return EvaluationText(text, f"file:{path.name}")
