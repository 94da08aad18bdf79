"""llama-server's flags in ``quantdesk serve``: the table (backend/settings/llama_server_flags.py)
covers every flag of the peer llama-server's ``--help``, docs/LLAMA_SERVER_FLAGS.md is
generated from it, serve accepts every supported or mapped spelling and refuses every
unsupported one with one line and exit status 2.

Builds serve's parser and reads files only: no model, no server.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend.entrypoints.main import build_parser
from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import settings_from_args
from backend.settings.llama_server_flags import (
    LLAMA_SERVER_FLAGS,
    SECTIONS,
    markdown,
    refusal,
)
from benchmarks.peer_servers import DEFAULT_LLAMA_SERVER

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "LLAMA_SERVER_FLAGS.md"
# a spelling at the start of a --help entry, or after a comma in it
HELP_FLAG = re.compile(r"(?:^|,)\s*(-{1,2}[A-Za-z0-9][A-Za-z0-9_.-]*)")
DESCRIPTION_COLUMN = 40


@pytest.fixture(autouse=True)
def isolated_home() -> None:
    """Overrides tests/conftest.py's: these tests build a parser only (no CPU probe)."""


def help_families(text: str) -> list[tuple[str, ...]]:
    """The flag families of llama-server's ``--help``: each entry's spellings, in order.

    An entry starts at column 0 with a dash; its description starts at column 40, or on
    the next line when the spellings and value name are too long.
    """
    families = []
    for line in text.splitlines():
        if not line.startswith("-") or line.startswith("-----"):
            continue
        head = line
        if (
            len(line) > DESCRIPTION_COLUMN
            and line[DESCRIPTION_COLUMN - 2 : DESCRIPTION_COLUMN] == "  "
        ):
            head = line[:DESCRIPTION_COLUMN]
        families.append(tuple(HELP_FLAG.findall(head)))
    return families


def _serve_parser() -> argparse.ArgumentParser:
    """serve's own parser, built as ``quantdesk serve`` builds it."""
    parser = build_parser("backend.entrypoints.serve_cmd")
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    serve: argparse.ArgumentParser = subparsers.choices["serve"]
    return serve


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser("backend.entrypoints.serve_cmd").parse_args(["serve", *argv])


def _spellings(status: str) -> list[tuple[str, str]]:
    return [
        (spelling, flag.text)
        for flag in LLAMA_SERVER_FLAGS
        if flag.status == status
        for spelling in flag.spellings
    ]


def test_the_page_is_generated_from_the_table() -> None:
    assert PAGE.read_text(encoding="utf-8") == markdown(), (
        "docs/LLAMA_SERVER_FLAGS.md is behind the table: run "
        "python -m backend.settings.llama_server_flags --markdown > docs/LLAMA_SERVER_FLAGS.md"
    )


def test_the_table_is_well_formed() -> None:
    spellings = [s for flag in LLAMA_SERVER_FLAGS for s in flag.spellings]
    assert len(spellings) == len(set(spellings)), "a spelling is listed twice"
    for flag in LLAMA_SERVER_FLAGS:
        assert flag.section in SECTIONS, flag
        assert flag.text.strip() and "\n" not in flag.text, flag
        assert all(alias.spelling in flag.spellings for alias in flag.aliases), flag
        assert not (flag.no_op and flag.status == "unsupported"), flag


def test_every_flag_of_the_peers_help_is_in_the_table() -> None:
    if not DEFAULT_LLAMA_SERVER.is_file():
        pytest.skip(f"no peer llama-server at {DEFAULT_LLAMA_SERVER}")
    run = subprocess.run(
        [str(DEFAULT_LLAMA_SERVER), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LD_LIBRARY_PATH": str(DEFAULT_LLAMA_SERVER.parent)},
    )
    assert run.returncode == 0, run.stderr
    families = help_families(run.stdout)
    assert len(families) > 200 and all(families)
    in_help = {spelling for family in families for spelling in family}
    in_table = {spelling for flag in LLAMA_SERVER_FLAGS for spelling in flag.spellings}
    assert sorted(in_help - in_table) == [], "llama-server flags missing from the table"
    assert sorted(in_table - in_help) == [], "table flags that llama-server's --help lacks"
    # each row is one --help entry, or one entry's on or off half
    family_of = {spelling: family for family in families for spelling in family}
    for flag in LLAMA_SERVER_FLAGS:
        assert {family_of[spelling] for spelling in flag.spellings} == {
            family_of[flag.spellings[0]]
        }, flag


def test_supported_and_mapped_spellings_are_serves_own() -> None:
    parser = _serve_parser()
    for status in ("supported", "mapped"):
        for spelling, _ in _spellings(status):
            action = parser._option_string_actions.get(spelling)
            assert action is not None, f"serve does not accept {status} {spelling}"
            if isinstance(action, argparse._HelpAction):
                continue
            value = str(next(iter(action.choices))) if action.choices else "1"
            argv = [spelling] if action.nargs == 0 else [spelling, value]
            _parse(argv)  # no SystemExit


def test_unsupported_spellings_are_refused_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    refused = _spellings("unsupported")
    assert refused
    for spelling, reason in refused:
        for argv in ([spelling], [spelling, "1"], [f"{spelling}=1"]):
            with pytest.raises(SystemExit) as exit_:
                _parse(argv)
            assert exit_.value.code == 2, argv
            assert capsys.readouterr().err == refusal(spelling, reason) + "\n", argv


def test_a_short_llama_server_flag_is_not_read_as_one_of_ours(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``-ag`` (llama-server's --agent) would be ``-a g``, our model alias 'g'."""
    with pytest.raises(SystemExit):
        _parse(["-ag"])
    assert capsys.readouterr().err.startswith("quantdesk serve: -ag is llama-server's")


def test_the_refusal_from_the_command_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "backend.entrypoints.main", "serve", "--lora=adapter.gguf"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        "quantdesk serve: --lora is llama-server's, not supported here: LoRA adapters are not "
        "supported; merge the adapter into the model before converting it"
    ]


def test_aliases_and_no_ops_give_the_settings_of_our_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in os.environ if n.startswith("QUANTDESK_")]:
        monkeypatch.delenv(name)

    def settings(argv: list[str]) -> tuple[EngineSettings, ServerSettings]:
        args = _parse(argv)
        return settings_from_args(EngineSettings, args), settings_from_args(ServerSettings, args)

    assert settings(["--n-gpu-layers", "5", "-cram", "64"]) == settings(
        ["-ngl", "5", "--cache-ram", "64"]
    )
    assert settings(["--no-mmproj-auto"]) == settings(["--no-mmproj"])
    assert settings(["--no-mmproj", "--mmproj-auto"]) == settings([])
    no_ops = [s for flag in LLAMA_SERVER_FLAGS if flag.no_op for s in flag.spellings]
    assert "--jinja" in no_ops and "--no-context-shift" not in no_ops  # a real flag now
    assert settings(no_ops) == settings([])
    assert settings(["--context-shift", "--no-context-shift"]) == settings([])


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["-a", "a,b"], "--alias"), (["--api-key", "k1,k2"], "--api-key")],
    ids=["aliases", "keys"],
)
def test_llama_servers_lists_of_aliases_and_keys_are_refused_not_taken_whole(
    argv: list[str], flag: str
) -> None:
    """llama-server splits these at commas; taking the whole value as one id or key would
    answer to a name or key nobody meant."""
    done = subprocess.run(
        [sys.executable, "-m", "backend.entrypoints.main", "serve", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and "comma-separated" in lines[0], lines
