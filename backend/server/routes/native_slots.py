"""llama-server's ``GET /slots``, read-only and behind the API key: what each of the
``--parallel`` slots is doing now.

With a KV stream per slot (the default layout) a slot is a llama.cpp sequence id, as in
llama-server. With ``--kv-unified`` the engine has no fixed slots: the running sequences
fill the entries in the order they were admitted, and the rest are idle. A processing
slot shows its request's id, prompt size, prompt tokens reused from the prefix cache,
tokens generated and left, and its sampling; the prompt and output text are not shown.
The view is read while the scheduler runs, so it is a moment's picture.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from backend.engine.engine import Engine
from backend.engine.sequence import Sequence
from backend.server.auth import require_api_key
from backend.server.generation import ready_engine
from backend.server.native.completion_result import sampling_settings

router = APIRouter(dependencies=[Depends(require_api_key)])


def _slot(engine: Engine, slot_id: int, seq: Sequence | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": slot_id,
        "n_ctx": engine.n_ctx,
        "speculative": engine.speculator is not None,
        "is_processing": seq is not None,
    }
    if seq is None:
        return out
    req = seq.request
    out.update(
        {
            "id_task": req.request_id,
            "n_prompt_tokens": seq.n_prompt,
            "n_prompt_tokens_cache": seq.cached_tokens,
            "params": {**sampling_settings(req.sampling), "n_predict": req.max_tokens},
            "next_token": [
                {
                    "has_next_token": True,
                    "n_remain": max(req.max_tokens - seq.completion_tokens, 0),
                    "n_decoded": seq.completion_tokens,
                }
            ],
        }
    )
    return out


def slot_states(engine: Engine) -> list[dict[str, Any]]:
    """One entry per slot, by id."""
    running = engine.scheduler.running  # a copy, taken at once
    n_slots = engine.settings.parallel
    if engine.runtime.kv_unified:
        ordered = sorted(running, key=lambda s: s.admit_order)
        by_slot = dict(enumerate(ordered))
    else:
        by_slot = {seq.seq_id: seq for seq in running}
    return [_slot(engine, i, by_slot.get(i)) for i in range(n_slots)]


@router.get("/slots")
async def slots(request: Request) -> list[dict[str, Any]]:
    return slot_states(ready_engine(request))
