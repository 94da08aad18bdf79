"""The CLI explains itself: every flag has help, serve shows defaults, fit's exit status."""

from __future__ import annotations

import argparse
import json

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
    # serve's largest context, without flash attention, with whole-context micro-batches:
    # terabytes of attention scores, more than any machine has
    huge = ["-c", "1048576", "-fa", "off", "-b", "65536", "-ub", "65536"]
    assert main(["models", "fit", "default", *huge]) == WONT_FIT_EXIT
    assert "verdict: wont_fit" in capsys.readouterr().out


def test_fit_names_the_flag_of_a_bad_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "fit", "default", "-c", "0"]) == 2
    err = capsys.readouterr().err
    assert "--ctx-size" in err and "n_ctx" not in err
    # the bounds are serve's: a context serve refuses is not estimated either
    assert main(["models", "fit", "default", "-c", "1048577"]) == 2
    assert "invalid --ctx-size" in capsys.readouterr().err


def test_fit_flags_are_serves_flags() -> None:
    """Every knob that changes memory use has the same flags, choices and default in both."""
    parsers = dict(_parsers(build_parser(), "quantdesk"))

    def options(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
        return {
            a.dest: (tuple(a.option_strings), a.choices, a.help)
            for a in parser._actions
            if a.option_strings and a.dest not in ("help", "json")
        }

    fit = options(parsers["quantdesk models fit"])
    serve = options(parsers["quantdesk serve"])
    assert {"ctx_size", "parallel", "cache_type_k", "gpu_layers", "kv_unified"} <= set(fit)
    assert {dest: serve[dest] for dest in fit} == fit


def test_fit_reads_the_flags_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "fit", "default", "--json", "-c", "1024", "-ctk", "q8_0"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert est["n_ctx"] == est["kv_cells"] == 1024 and est["cache_type_k"] == "q8_0"


def test_fit_counts_a_draft_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "fit", "default", "--json", "-c", "1024"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["models", "fit", "default", "--json", "-c", "1024", "-md", "default"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["draft_bytes"] > 0 and alone["draft_bytes"] == 0
    assert both["total_bytes"] == alone["total_bytes"] + both["draft_bytes"]
    assert main(["models", "fit", "default", "-c", "1024", "-md", "default"]) == 0
    assert "draft model (-md):" in capsys.readouterr().out
