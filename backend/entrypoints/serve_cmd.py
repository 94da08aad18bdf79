"""``quantdesk serve``: the OpenAI-compatible server.

``-m`` once serves that model in this process, as before. With no ``-m`` the library is
served (router mode: each model in a child server of its own, loaded on demand); ``-m``
given more than once is router mode with those models preloaded and pinned.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backend.core.errors import ConfigError
from backend.settings import EngineSettings, RouterSettings, ServerSettings
from backend.settings.flags import add_settings_flags, settings_from_args
from backend.settings.llama_server_flags import add_llama_server_flags

_MODEL_HELP = (
    "GGUF file to serve, a library name, or 'default' for the embedded SmolLM2-135M-Instruct; "
    "give it more than once to serve several models (router mode, each preloaded and "
    "pinned), or leave it out to serve the whole library (router mode)"
)


class _ModelsAction(argparse.Action):
    """``-m`` as before (the last one is ``model``), also gathering every one in ``models``."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        models = [*getattr(namespace, "models", []), str(values)]
        namespace.models = models
        setattr(namespace, self.dest, str(values))


log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    from backend.hub.hub_settings import HubSettings

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve a GGUF (or the whole library) behind a local OpenAI-compatible API",
        description="Serve GGUF models with continuous batching behind an OpenAI-compatible "
        "API. Flags follow llama-server's; every flag also reads QUANTDESK_<NAME> from the "
        "environment. In router mode the engine flags are every model's defaults.",
        # llama-server takes no abbreviations: a prefix of one of our flags that is a flag
        # of its own there must not be read as ours
        allow_abbrev=False,
    )
    group = parser.add_argument_group("models")
    group.add_argument(
        "-m", "--model", dest="model", action=_ModelsAction, default=argparse.SUPPRESS,
        help=_MODEL_HELP,
    )  # fmt: skip
    # a router's model server: one model in this process, whatever the flags (else a
    # model on --rpc workers would start a router of its own)
    group.add_argument("--model-server", action="store_true", help=argparse.SUPPRESS)
    add_settings_flags(parser, EngineSettings, skip=("model",))
    add_settings_flags(parser, ServerSettings)
    add_settings_flags(parser, RouterSettings)
    add_settings_flags(parser, HubSettings)
    # the rest of llama-server's flags: aliases of ours, no-ops, one-line refusals
    add_llama_server_flags(parser)
    parser.set_defaults(handler=run)


def _model_from_environment() -> bool:
    return any(name.upper() == "QUANTDESK_MODEL" for name in os.environ)


def run(args: argparse.Namespace) -> int:
    alias = getattr(args, "model_alias", None)
    if alias and "," in alias and not args.model_server:  # a router's child: a library name
        raise ConfigError(
            "invalid --alias: one model id only here (llama-server takes a comma-separated "
            "list of aliases)"
        )
    models: list[str] = list(getattr(args, "models", []))
    if len(models) == 1 or (not models and _model_from_environment()):
        engine = settings_from_args(EngineSettings, args)
        if engine.rpc and not args.model_server:
            # llama.cpp aborts the process whose RPC worker is lost (GGML_ABORT); served
            # from a child of the router, the model fails and the server stays up
            log.info("--rpc: the model is served from a child process of a router")
            return _run_router(args, models or [str(engine.model)])
        return _run_single(args)
    return _run_router(args, models)


def _run_single(args: argparse.Namespace) -> int:
    engine_settings = settings_from_args(EngineSettings, args)
    server_settings = settings_from_args(ServerSettings, args)
    from backend.server.runner import ServerHandle
    from backend.settings.default_model import resolve_model_path

    resolve_model_path(engine_settings.model)  # fail fast on a missing file
    ServerHandle(engine_settings, server_settings).run()
    return 0


def _run_router(args: argparse.Namespace, models: list[str]) -> int:
    from backend.hub.hub_settings import HubSettings
    from backend.hub.library import ModelLibrary
    from backend.router.model_catalog import CatalogEntry, ModelCatalog
    from backend.router.runner import RouterHandle

    # one line per proxied request and per readiness poll of a loading model is noise
    logging.getLogger("httpx").setLevel(logging.WARNING)
    defaults = settings_from_args(EngineSettings, args)
    if defaults.model_alias and len(models) > 1:
        raise ConfigError("--alias names one model; a library model's id is its library name")
    server_settings = settings_from_args(ServerSettings, args)
    router_settings = settings_from_args(RouterSettings, args)
    library = ModelLibrary(settings_from_args(HubSettings, args))

    def preload_entry(model: str) -> CatalogEntry:
        path = Path(model).expanduser()
        if not path.is_file():  # 'default' or a library name
            item = library.find(model)
            return CatalogEntry(item.name, Path(item.path), item.size_bytes)
        for item in library.entries():  # a library file keeps its library name
            if Path(item.path).absolute() == path.absolute():
                return CatalogEntry(item.name, path, item.size_bytes)
        return CatalogEntry(path.name.removesuffix(".gguf"), path, path.stat().st_size)

    extra = [preload_entry(model) for model in models]
    catalog = ModelCatalog(library, extra)
    RouterHandle(
        catalog,
        defaults,
        server_settings,
        router_settings,
        preload=[entry.model_id for entry in extra],
    ).run()
    return 0
