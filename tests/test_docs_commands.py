"""The commands in README.md and docs/*.md name real things: every ``quantdesk`` command in a
code block parses with the real command's flags; every ``make`` target, ``python -m`` module
and script path that the docs' code names exists (the test files they name included); the
llama-cpp-python version they name is the one pyproject.toml pins.

Which test runs each command for real is said beside it in the docs (or that it is untested);
this file keeps the rest from going stale when a flag, target or script is renamed. It builds
the argument parser (importing llama-cpp-python, loading no model) and reads files only.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_docs_links import CODE_SPAN, DOCS, FENCE, ROOT, outside_fences

SHELL_LANGUAGES = frozenset({"", "bash", "sh", "shell", "console"})
SHELL_OPERATORS = frozenset({"<", ">", ">>", "|", "&&", "||", ";", "&", "2>&1"})
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAKE_TARGET_RULE = re.compile(r"^([A-Za-z][\w.-]*)\s*:(?!=)", re.MULTILINE)
SCRIPT = re.compile(r"^\.?/?([\w.-]+/)+[\w.-]+\.(?:sh|py)$")


@dataclass(frozen=True)
class Command:
    doc: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}: {self.text}"


def _shell_block_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, line, is a console block) of fenced shell blocks and indented code."""
    fence: str | None = None
    language = ""
    previous_blank = True
    in_indented = False
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * len(opened.group(1))
            language = line.strip()[len(fence) :].strip().split(" ")[0].lower()
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            elif language in SHELL_LANGUAGES:
                yield number, line, language == "console"
            continue
        if line.startswith("    ") and line.strip() and (previous_blank or in_indented):
            in_indented = True
            yield number, line[4:], False
        else:
            in_indented = False
        previous_blank = not line.strip()


def shell_commands(doc: Path) -> list[Command]:
    """The shell commands of a page's code blocks, continuation lines joined; a console
    block's commands are its ``$ `` lines."""
    commands: list[Command] = []
    pending: tuple[int, str] | None = None
    for number, line, console in _shell_block_lines(doc.read_text(encoding="utf-8")):
        if pending is None:
            if console:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            pending = (number, "")
        start, text = pending
        text += line.rstrip().removesuffix("\\") + " "
        if line.rstrip().endswith("\\"):
            pending = (start, text)
            continue
        pending = None
        if text.strip():
            commands.append(Command(doc, start, text.strip()))
    return commands


def words(command: Command) -> list[str]:
    """The command's words up to the first shell operator, without leading VAR=value."""
    try:
        argv = shlex.split(command.text, comments=True)
    except ValueError as exc:
        raise AssertionError(f"{command}: not valid shell: {exc}") from None
    while argv and ENV_ASSIGNMENT.match(argv[0]):
        argv.pop(0)
    for index, word in enumerate(argv):
        if word in SHELL_OPERATORS:
            return argv[:index]
    return argv


def inline_code(doc: Path) -> list[Command]:
    """Every code span in a page's prose (fenced blocks left out)."""
    spans: list[Command] = []
    for number, line in outside_fences(doc.read_text(encoding="utf-8")):
        for span in CODE_SPAN.finditer(line):
            spans.append(Command(doc, number, span.group(0).strip("`").strip()))
    return spans


ALL_COMMANDS = [command for doc in DOCS for command in shell_commands(doc)]
QUANTDESK_COMMANDS = [
    command for command in ALL_COMMANDS if (w := words(command)) and w[0].endswith("quantdesk")
]
# every command-like piece of code: block lines and code spans
ALL_CODE = ALL_COMMANDS + [span for doc in DOCS for span in inline_code(doc)]


@pytest.fixture(autouse=True)
def isolated_home() -> None:
    """Overrides tests/conftest.py's: these tests parse and read only (no CPU probe)."""


def test_the_docs_have_quantdesk_commands() -> None:
    assert len(QUANTDESK_COMMANDS) >= 20
    firsts = {words(command)[1] for command in QUANTDESK_COMMANDS}
    assert {"serve", "models", "quantize", "compare", "bench", "worker", "chat"} <= firsts


@pytest.mark.parametrize("command", QUANTDESK_COMMANDS, ids=str)
def test_every_quantdesk_command_parses(command: Command) -> None:
    from backend.entrypoints.main import build_parser

    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(words(command)[1:])
        except SystemExit as exc:
            raise AssertionError(f"{command}\n{errors.getvalue()}") from exc


def _makefile_targets() -> set[str]:
    return set(MAKE_TARGET_RULE.findall((ROOT / "Makefile").read_text(encoding="utf-8")))


def test_every_make_target_exists() -> None:
    targets = _makefile_targets()
    assert {"run", "test"} <= targets
    missing = []
    for code in ALL_CODE:
        try:
            argv = shlex.split(code.text, comments=True)
        except ValueError:
            continue  # a span that is not a command (a quote in prose)
        while argv and ENV_ASSIGNMENT.match(argv[0]):
            argv.pop(0)
        if len(argv) < 2 or argv[0] != "make":
            continue
        named = [word for word in argv[1:] if not ENV_ASSIGNMENT.match(word)]
        missing += [f"{code}: no target {word!r}" for word in named if word not in targets]
    assert missing == []


def test_every_python_module_and_script_exists() -> None:
    missing = []
    for code in ALL_CODE:
        try:
            argv = shlex.split(code.text, comments=True)
        except ValueError:
            continue  # a span that is not a command (a quote in prose)
        for index, word in enumerate(argv):
            if word == "-m" and 0 < index < len(argv) - 1 and "python" in argv[index - 1]:
                module = argv[index + 1]
                if importlib.util.find_spec(module) is None:
                    missing.append(f"{code}: no module {module!r}")
            elif SCRIPT.match(word) and not word.startswith((".venv/", "/")):
                top = Path(word.removeprefix("./")).parts[0]
                if (ROOT / top).is_dir() and not (ROOT / word).is_file():
                    missing.append(f"{code}: no file {word}")
    assert missing == []


def test_the_extraction_reads_blocks_continuations_and_console_prompts(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\n.venv/bin/quantdesk serve -m default   # a comment\n"
        "X=1 quantdesk compare --reference a.gguf b.gguf \\\n    --json c.json\n```\n\n"
        '```console\n$ quantdesk chat --yes "Hi" < notes.txt\nthe answer\n```\n\n'
        "```python\nquantdesk = 1\n```\n\n"
        "Prose:\n\n    quantdesk worker --check\n"
    )
    got = [(c.line, words(c)) for c in shell_commands(page)]
    assert got == [
        (2, [".venv/bin/quantdesk", "serve", "-m", "default"]),
        (3, ["quantdesk", "compare", "--reference", "a.gguf", "b.gguf", "--json", "c.json"]),
        (8, ["quantdesk", "chat", "--yes", "Hi"]),
        (18, ["quantdesk", "worker", "--check"]),
    ]


def test_the_llama_cpp_python_version_is_the_pinned_one() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pinned = re.search(r'"llama-cpp-python==([\d.]+)"', pyproject)
    assert pinned is not None
    named = {
        f"{doc.relative_to(ROOT)}: {version}"
        for doc in DOCS
        for version in re.findall(
            r"llama-cpp-python(?:==| )(\d+\.\d+\.\d+)", doc.read_text(encoding="utf-8")
        )
        if version != pinned.group(1)
    }
    assert named == set()
