"""llama-server's ``GET /slots`` and ``POST /slots/{id}?action=save|restore|erase``, behind
the API key: what each of the ``--parallel`` slots is doing now, and a slot's tokens and KV
saved to a file under ``--slot-save-path``, restored from one, or erased
(:mod:`backend.engine.slot_files`).

With a KV stream per slot (the default layout) a slot is a llama.cpp sequence id, as in
llama-server. With ``--kv-unified`` the engine has no fixed slots: the running sequences
fill the entries in the order they were admitted, and the rest are idle. A processing
slot shows its request's id, prompt size, prompt tokens reused from the prefix cache,
tokens generated and left, and its sampling; the prompt and output text are not shown.
The view is read while the scheduler runs, so it is a moment's picture.

The actions answer llama-server's shapes: ``{"id_slot", "filename", "n_saved", "n_written",
"timings": {"save_ms"}}``, ``{"id_slot", "filename", "n_restored", "n_read", "timings":
{"restore_ms"}}`` and ``{"id_slot", "n_erased"}``. Without ``--slot-save-path`` every action
is a 501, as there; a bad slot id, action or file name is a 400, and so is a slot that is
processing a request (llama-server queues the action until the slot is idle).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request

from backend.engine.engine import Engine
from backend.engine.sequence import Sequence
from backend.engine.slot_files import SlotActionError, SlotFileResult
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import off_loop, ready_engine
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


ACTIONS = ("save", "restore", "erase")
_FORBIDDEN = frozenset(':*?"<>|/\\') | {"\uff0e", "\u2215", "\u2216", "\ufffd", "\ufeff"}


def valid_filename(name: str) -> bool:
    """llama.cpp's ``fs_validate_filename`` without folders: a plain file name."""
    if not name or len(name.encode("utf-8", "surrogatepass")) > 255:
        return False
    for ch in name:
        c = ord(ch)
        if c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xDFFF or ch in _FORBIDDEN:
            return False
    return not (name[0] == " " or name[-1] in " ." or ".." in name)


def _invalid(message: str, param: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_request")


async def _filename(request: Request) -> str:
    """The body's ``filename``, a plain name."""
    try:
        body = json.loads(await request.body() or b"null")
    except (ValueError, RecursionError):
        raise _invalid("the request body is not valid JSON", "filename") from None
    name = body.get("filename") if isinstance(body, dict) else None
    if not isinstance(name, str):
        raise _invalid('the body must be {"filename": "NAME"}', "filename")
    if not valid_filename(name):
        raise _invalid(
            "Invalid filename: a plain file name in --slot-save-path (no folders, '..', "
            'control characters or any of :*?"<>|)',
            "filename",
        )
    return name


def _file_answer(slot: int, name: str, done: SlotFileResult, *, save: bool) -> dict[str, Any]:
    if save:
        counts = {"n_saved": done.n_tokens, "n_written": done.n_bytes}
        return {"id_slot": slot, "filename": name, **counts, "timings": {"save_ms": done.ms}}
    counts = {"n_restored": done.n_tokens, "n_read": done.n_bytes}
    return {"id_slot": slot, "filename": name, **counts, "timings": {"restore_ms": done.ms}}


@router.post("/slots/{id_slot}")
async def slot_action(request: Request, id_slot: str, action: str = "") -> dict[str, Any]:
    folder: str | None = request.app.state.server_settings.slot_save_path
    if not folder:
        raise ApiError(
            501,
            "This server does not support slots action. Start it with `--slot-save-path`",
            type_="not_supported_error",
            code="not_supported",
        )
    try:
        slot = int(id_slot)
    except ValueError:
        raise _invalid(f"Invalid slot ID {id_slot!r}: a number", "id_slot") from None
    if action not in ACTIONS:
        raise _invalid(f"Invalid action {action!r}: save, restore or erase", "action")
    engine = ready_engine(request)
    files = engine.slot_files
    reason = files.unsupported()
    if reason is not None:
        raise _invalid(f"slots cannot be saved or restored here: {reason}", "id_slot")
    if not 0 <= slot < files.n_slots:
        raise _invalid(f"Invalid slot ID {slot}: slots are 0 to {files.n_slots - 1}", "id_slot")
    try:
        if action == "erase":
            return {"id_slot": slot, "n_erased": await off_loop(files.erase, slot)}
        name = await _filename(request)
        path = Path(folder).expanduser() / name
        if action == "save":
            return _file_answer(slot, name, await off_loop(files.save, slot, path), save=True)
        return _file_answer(slot, name, await off_loop(files.restore, slot, path), save=False)
    except SlotActionError as exc:
        raise ApiError(400, str(exc), param=exc.param, code=exc.code) from None
