"""llama-server's ``GET /props`` and ``POST /apply-template``, for tools written against
llama.cpp (llama.vscode, the llama.cpp web UI): what is served and how prompts are built.

``/props`` gives what this server truly has, under llama-server's names: the model file's
name (never its folder: that names the user's home), the context of one slot (``n_ctx``
in ``default_generation_settings``, as llama-server reports it), the slot count, the chat
template and the defaults a request without sampling fields gets. No image or audio input.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from fastapi import APIRouter, Depends, Request

from backend.engine.engine import Engine
from backend.engine.request_types import SamplingParams
from backend.server.auth import require_api_key
from backend.server.chat_preparation import render_chat_text
from backend.server.generation import (
    DEFAULT_MIN_P,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
    off_loop,
    ready_engine,
)
from backend.server.native.completion_result import sampling_settings
from backend.server.schemas import ChatCompletionRequest

router = APIRouter(dependencies=[Depends(require_api_key)])


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def build_info() -> str:
    """What serves the requests: QuantDesk and the llama.cpp binding it runs on."""
    return f"quantdesk-{_version('quantdesk')} llama-cpp-python-{_version('llama_cpp_python')}"


def default_params(engine: Engine, max_tokens_limit: int) -> dict[str, Any]:
    """The sampling a request gets for the fields it leaves out (``n_predict``: the most
    tokens a request without one may generate, ``--max-tokens-limit``)."""
    seed = engine.settings.seed
    defaults = SamplingParams(
        temperature=DEFAULT_TEMPERATURE,
        top_k=DEFAULT_TOP_K,
        top_p=DEFAULT_TOP_P,
        min_p=DEFAULT_MIN_P,
        seed=seed if seed is not None and seed >= 0 else None,
    )
    return {
        **sampling_settings(defaults),
        "max_tokens": max_tokens_limit,
        "n_predict": max_tokens_limit,
        "stream": False,
        "n_probs": 0,
    }


@router.get("/props")
async def props(request: Request) -> dict[str, Any]:
    engine = ready_engine(request)
    info = engine.runtime.info
    limit: int = request.app.state.server_settings.max_tokens_limit
    return {
        "default_generation_settings": {
            "n_ctx": engine.n_ctx,
            "params": default_params(engine, limit),
        },
        "total_slots": engine.settings.parallel,
        "model_alias": engine.model_id,
        "model_path": engine.model_path.name,
        "modalities": engine.modalities(),
        "capabilities": engine.capabilities,
        "endpoint_slots": True,
        "endpoint_props": True,
        "endpoint_metrics": True,
        "chat_template": engine.chat_template.source,
        "bos_token": info.bos_token,
        "eos_token": info.eos_token,
        "build_info": build_info(),
        # QuantDesk's: which CPU path the weights take (AMX, repack or plain) and why
        "cpu_path": engine.runtime.cpu_path.to_json(),
    }


@router.post("/apply-template")
async def apply_template(body: ChatCompletionRequest, request: Request) -> dict[str, str]:
    """The prompt text that a chat request's ``messages`` (and ``tools``) become, rendered
    as ``/v1/chat/completions`` renders them, without generating."""
    engine = ready_engine(request)
    return {"prompt": await off_loop(render_chat_text, body, engine)}
