"""The CLI explains itself: every flag has help, serve shows defaults, fit's exit status."""

from __future__ import annotations

import argparse

import pytest

from backend.entrypoints.main import build_parser, main
from backend.entrypoints.models_cmd import WONT_FIT_EXIT


def _parsers(
    parser: argparse.ArgumentParser, path: str
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _parsers(sub, f"{path} {name}")
    return found


def test_every_flag_of_every_command_has_help() -> None:
    missing = [
        f"{path} {'/'.join(a.option_strings)}"
        for path, parser in _parsers(build_parser(), "quantdesk")
        for a in parser._actions
        if a.option_strings and not a.help and a.help != argparse.SUPPRESS
    ]
    assert not missing, missing


def test_serve_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 4096)" in text and "(default: 8080)" in text


def test_fit_exit_status_tells_a_script_whether_it_fits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["models", "fit", "default", "-c", "2048"]) == 0
    assert "verdict: fits" in capsys.readouterr().out
    assert main(["models", "fit", "default", "-c", "1000000000", "-np", "1"]) == WONT_FIT_EXIT
    assert "verdict: wont_fit" in capsys.readouterr().out


def test_fit_names_the_flag_of_a_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["models", "fit", "default", "-c", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--ctx-size" in err and "n_ctx" not in err
