"""The Server page's knobs reach ``quantdesk serve`` unchanged, through serve's own parser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.page_models.server_command import serve_arguments
from app.storage.app_settings import ServerKnobs
from backend.entrypoints.main import build_parser
from backend.settings import EngineSettings, ServerSettings
from backend.settings.engine_settings import ServingKnobs
from backend.settings.flags import settings_from_args
from backend.settings.server_settings import ListenSettings


@pytest.fixture
def no_quantdesk_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("QUANTDESK_")]:
        monkeypatch.delenv(name)


def _served(argv: list[str]) -> tuple[EngineSettings, ServerSettings]:
    args = build_parser().parse_args(argv)
    assert args.command == "serve"
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
        kv_per_slot=True,
        prefix_cache_entries=2,
        host="::1",
        port=9000,
        cors_origins=["http://a", "http://b"],
        api_key=" sekret ",
    )
    engine, server = _served(serve_arguments(knobs, tmp_path / "port", port=0))
    assert {n: getattr(engine, n) for n in ServingKnobs.model_fields} == {
        n: getattr(knobs, n) for n in ServingKnobs.model_fields
    }
    assert {n: getattr(server, n) for n in ListenSettings.model_fields} == {
        "host": "::1",
        "port": 0,  # the port the supervisor asked for, not the saved one
        "cors_origins": ["http://a", "http://b"],
    }
    assert server.api_key == "sekret" and server.port_file == str(tmp_path / "port")


@pytest.mark.usefixtures("no_quantdesk_env")
def test_serve_defaults_are_the_knob_defaults(tmp_path: Path) -> None:
    knobs = ServerKnobs()
    argv = serve_arguments(knobs, tmp_path / "port")
    engine, server = _served(argv)
    assert engine.model_dump(include=set(ServingKnobs.model_fields)) == knobs.model_dump(
        include=set(ServingKnobs.model_fields)
    )
    assert server.port == knobs.port == 8080 and server.api_key is None
    assert "--api-key" not in argv  # serve refuses a blank key: an empty box is no key
    assert "--api-key" not in serve_arguments(ServerKnobs(api_key="   "), tmp_path / "port")
