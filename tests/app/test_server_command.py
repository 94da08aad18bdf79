"""The Server page's knobs reach ``quantdesk serve`` unchanged, through serve's own parser."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.page_models.server_command import serve_arguments, serve_environment
from app.page_models.speculative_choice import SpecMode, spec_update
from app.storage.app_settings import ServerKnobs
from app.workers.server_process import ServerState, ServerSupervisor
from backend.entrypoints.main import build_parser
from backend.settings import EngineSettings, ServerSettings
from backend.settings.engine_settings import ServingKnobs, SpeculativeKnobs
from backend.settings.flags import settings_from_args
from backend.settings.server_settings import ListenSettings


@pytest.fixture
def no_quantdesk_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("QUANTDESK_")]:
        monkeypatch.delenv(name)


def _served(
    argv: list[str], env: dict[str, str | None] | None = None
) -> tuple[EngineSettings, ServerSettings]:
    """The settings ``serve`` builds from ``argv`` with the supervisor's ``env`` changes."""
    args = build_parser().parse_args(argv)
    assert args.command == "serve"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in (env or {}).items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        return settings_from_args(EngineSettings, args), settings_from_args(ServerSettings, args)


@pytest.mark.usefixtures("no_quantdesk_env")
def test_serve_gets_every_knob(tmp_path: Path) -> None:
    knobs = ServerKnobs(
        model="/models/a.gguf",
        ctx_size=1024,
        batch_size=256,
        ubatch_size=128,
        parallel=2,
        gpu_layers=-1,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        flash_attn="on",
        threads=3,
        kv_unified=True,
        prefix_cache_entries=2,
        spec_type="ngram-simple,draft-simple",
        spec_ngram_simple_size_n=8,
        spec_ngram_simple_size_m=32,
        spec_ngram_simple_min_hits=2,
        model_draft="/models/small draft.gguf",
        draft_max=7,
        draft_min=2,
        draft_p_min=0.6,
        gpu_layers_draft=-1,
        host="::1",
        port=9000,
        cors_origins=["http://a", "http://b"],
        ollama_port=11434,
        api_key=" sekret ",
    )
    argv = serve_arguments(knobs, tmp_path / "port", port=0)
    assert not any("sekret" in arg for arg in argv)  # never on the command line
    engine, server = _served(argv, serve_environment(knobs))
    for group in (ServingKnobs, SpeculativeKnobs):
        assert {n: getattr(engine, n) for n in group.model_fields} == {
            n: getattr(knobs, n) for n in group.model_fields
        }
    assert engine.spec_types == ("ngram-simple", "draft-simple")
    assert {n: getattr(server, n) for n in ListenSettings.model_fields} == {
        "host": "::1",
        "port": 0,  # the port the supervisor asked for, not the saved one
        "cors_origins": ["http://a", "http://b"],
        "ollama_port": 11434,
    }
    assert server.api_key == "sekret" and server.port_file == str(tmp_path / "port")


@pytest.mark.usefixtures("no_quantdesk_env")
def test_serve_defaults_are_the_knob_defaults(tmp_path: Path) -> None:
    knobs = ServerKnobs()
    argv = serve_arguments(knobs, tmp_path / "port")
    engine, server = _served(argv)
    shared = set(ServingKnobs.model_fields) | set(SpeculativeKnobs.model_fields)
    assert engine.model_dump(include=shared) == knobs.model_dump(include=shared)
    assert engine.spec_types == ("ngram-simple",) and engine.model_draft is None  # the default
    assert server.port == knobs.port == 8080 and server.api_key is None
    assert "--api-key" not in argv
    # an empty box is no key, even when the GUI itself runs with one in its environment
    blank = ServerKnobs(api_key="   ")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QUANTDESK_API_KEY", "inherited")
        _engine, server = _served(
            serve_arguments(blank, tmp_path / "port"), serve_environment(blank)
        )
    assert server.api_key is None


def _reporting_launcher(report: Path) -> list[str]:
    """A stand-in for the CLI that writes down the key it got and its argv, then exits."""
    script = (
        "import json, os, sys; "
        f"open({str(report)!r}, 'w').write(json.dumps("
        "{'key': os.environ.get('QUANTDESK_API_KEY'), 'argv': sys.argv[1:]}))"
    )
    return [sys.executable, "-c", script]


@pytest.mark.parametrize(("box", "expected"), [(" sekret ", "sekret"), ("", None)])
def test_the_supervisor_hands_the_key_over_in_the_environment(
    qtbot: QtBot,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    box: str,
    expected: str | None,
) -> None:
    monkeypatch.setenv("QUANTDESK_API_KEY", "the-gui's-own")  # never inherited by the child
    report = tmp_path / "report.json"
    supervisor = ServerSupervisor(launcher=lambda: _reporting_launcher(report))
    supervisor.start(ServerKnobs(api_key=box))
    qtbot.waitUntil(lambda: report.exists() and report.stat().st_size > 0, timeout=20_000)
    got = json.loads(report.read_text())
    assert got["key"] == expected
    assert not any("sekret" in arg for arg in got["argv"]) and "--api-key" not in got["argv"]
    qtbot.waitUntil(lambda: supervisor.state is not ServerState.STARTING, timeout=20_000)


@pytest.mark.usefixtures("no_quantdesk_env")
@pytest.mark.parametrize(
    ("mode", "types"),
    [("off", ()), ("ngram", ("ngram-simple",)), ("draft", ("draft-simple",))],
)
def test_each_speculative_choice_reaches_serve(
    tmp_path: Path, mode: SpecMode, types: tuple[str, ...]
) -> None:
    """What the Server page's choice sets is what serve runs: off passes no draft model
    (a draft model alone would turn drafting on)."""
    saved = ServerKnobs(model_draft="/models/draft.gguf", draft_max=5)
    knobs = saved.model_copy(update=spec_update(saved, mode, "/models/picked.gguf"))
    engine, _server = _served(serve_arguments(knobs, tmp_path / "port"))
    assert engine.spec_types == types == knobs.spec_types
    assert engine.model_draft == ("/models/picked.gguf" if mode == "draft" else None)
    assert engine.draft_max == 5
