"""``quantdesk serve``: the OpenAI-compatible server on one model."""

from __future__ import annotations

import argparse
from typing import Any

from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import add_settings_flags, settings_from_args


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve a GGUF behind a local OpenAI-compatible API",
        description="Serve a GGUF with continuous batching behind an OpenAI-compatible API. "
        "Flags follow llama-server's; every flag also reads QUANTDESK_<NAME> from the environment.",
    )
    add_settings_flags(parser, EngineSettings)
    add_settings_flags(parser, ServerSettings)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    engine_settings = settings_from_args(EngineSettings, args)
    server_settings = settings_from_args(ServerSettings, args)
    from backend.server.runner import ServerHandle
    from backend.settings.default_model import resolve_model_path

    resolve_model_path(engine_settings.model)  # fail fast on a missing file
    ServerHandle(engine_settings, server_settings).run()
    return 0
