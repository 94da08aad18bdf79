"""llama-server's ``POST /slots/{id}?action=save|restore|erase`` on the real server and
SmolLM2, with the request and answer shapes of llama.cpp's
tools/server/tests/unit/test_slot_save.py: a saved slot restored into another slot gives the
next request sharing its tokens their KV (``timings.cache_n``) and the same greedy answer;
bad files, names, actions and slots are 400s that change nothing; a busy slot is refused;
without ``--slot-save-path`` every action is llama-server's 501."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from backend.engine.session_cache import SessionEntry
from backend.engine.session_disk_store import MAGIC, PREFIX, encode_entry, write_entry_file
from backend.server.runner import ServerHandle
from backend.settings import EngineSettings, ServerSettings
from tests.server.conftest import LiveServer, wait_healthy

HTTP = httpx.Client(timeout=120.0)
PROMPT = (
    "A build system rebuilds a target when any of its inputs changed. The core library is "
    "built first, then the network layer, then the user interface. Which one comes last?"
)
N_PREDICT = 16


def _start(slot_save_path: Path | None, *, parallel: int, ctx_size: int) -> LiveServer:
    engine = EngineSettings(
        ctx_size=ctx_size, parallel=parallel, threads=2, seed=1, cache_ram=0, cache_disk=0
    )
    settings = ServerSettings(
        host="127.0.0.1",
        port=0,
        max_tokens_limit=512,
        slot_save_path=str(slot_save_path) if slot_save_path else None,
    )
    handle = ServerHandle(engine, settings)
    handle.start_thread()
    server = LiveServer(handle, handle.base_url, None)
    wait_healthy(server.base_url)
    return server


@pytest.fixture(scope="module")
def slot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def server(slot_dir: Path) -> Iterator[LiveServer]:
    """Two slots of 2,048 cells (the tiers off, so that only the slots hold a prefix)."""
    started = _start(slot_dir, parallel=2, ctx_size=4096)
    yield started
    started.handle.stop()


def action(server: LiveServer, slot: int | str, act: str, body: Any = None) -> httpx.Response:
    url = f"{server.base_url}/slots/{slot}?action={act}"
    return HTTP.post(url, json=body) if body is not None else HTTP.post(url)


def ok(server: LiveServer, slot: int, act: str, filename: str | None = None) -> dict[str, Any]:
    r = action(server, slot, act, {"filename": filename} if filename else None)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def complete(server: LiveServer, prompt: str | list[int] = PROMPT) -> dict[str, Any]:
    r = HTTP.post(
        f"{server.base_url}/completion",
        json={
            "prompt": prompt,
            "n_predict": N_PREDICT,
            "temperature": 0.0,
            "ignore_eos": True,
            "cache_prompt": True,
            "return_tokens": True,
        },
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def empty_slots(server: LiveServer) -> None:
    for slot in (0, 1):
        ok(server, slot, "erase")


def test_save_erase_restore_continues_token_for_token(server: LiveServer, slot_dir: Path) -> None:
    empty_slots(server)
    first = complete(server)
    n_prompt = first["timings"]["prompt_n"] + first["timings"]["cache_n"]
    assert first["timings"]["cache_n"] == 0
    # the slot holds the prompt and every token decoded: the last one sampled is not
    n_slot = n_prompt + N_PREDICT - 1

    saved = ok(server, 0, "save", "round.bin")  # a request takes the lowest idle slot
    assert set(saved) == {"id_slot", "filename", "n_saved", "n_written", "timings"}
    assert saved["id_slot"] == 0 and saved["filename"] == "round.bin"
    assert saved["n_saved"] == n_slot
    assert saved["n_written"] == (slot_dir / "round.bin").stat().st_size
    assert set(saved["timings"]) == {"save_ms"} and saved["timings"]["save_ms"] >= 0

    assert ok(server, 0, "erase") == {"id_slot": 0, "n_erased": n_slot}
    assert ok(server, 0, "erase") == {"id_slot": 0, "n_erased": 0}
    again = complete(server)  # nothing cached any more: prefilled again, same answer
    assert again["timings"]["cache_n"] == 0
    assert again["content"] == first["content"]
    assert ok(server, 0, "erase")["n_erased"] == n_slot

    restored = ok(server, 1, "restore", "round.bin")  # into the other slot
    assert set(restored) == {"id_slot", "filename", "n_restored", "n_read", "timings"}
    assert restored["id_slot"] == 1 and restored["filename"] == "round.bin"
    assert restored["n_restored"] == n_slot
    assert restored["n_read"] == saved["n_written"]
    assert set(restored["timings"]) == {"restore_ms"}

    after = complete(server)
    assert after["timings"]["cache_n"] == n_prompt - 1  # one token decoded for its logits
    assert after["timings"]["prompt_n"] == 1
    assert after["content"] == first["content"]
    assert after["tokens"] == first["tokens"]

    # a prompt holding the whole slot reuses every restored token
    ok(server, 1, "restore", "round.bin")
    prompt_ids = HTTP.post(f"{server.base_url}/tokenize", json={"content": PROMPT}).json()["tokens"]
    assert len(prompt_ids) == n_prompt
    longer = complete(server, [*prompt_ids, *first["tokens"]])
    assert longer["timings"]["cache_n"] == restored["n_restored"]
    assert longer["timings"]["prompt_n"] == 1


def _foreign(good: Path, to: Path) -> None:
    """``good``'s entry under another key (another KV setting)."""
    raw = good.read_bytes()
    _, length = PREFIX.unpack_from(raw)
    header = json.loads(raw[PREFIX.size : PREFIX.size + length])
    n = header["n_tokens"]
    body = raw[PREFIX.size + length :]
    entry = SessionEntry(
        np.frombuffer(body[: 4 * n], dtype="<i4").astype(np.int32),
        np.frombuffer(body[4 * n :], dtype=np.uint8),
    )
    write_entry_file(to, encode_entry({**header["key"], "cache_type_k": "q8_0"}, entry))


def test_a_bad_file_is_a_400_and_changes_nothing(server: LiveServer, slot_dir: Path) -> None:
    empty_slots(server)
    first = complete(server)
    n_prompt = first["timings"]["prompt_n"]
    saved = ok(server, 0, "save", "good.bin")
    assert ok(server, 1, "restore", "good.bin")["n_restored"] == saved["n_saved"]

    good = (slot_dir / "good.bin").read_bytes()
    assert good.startswith(MAGIC)
    (slot_dir / "truncated.bin").write_bytes(good[:-100])
    flipped = bytearray(good)
    flipped[-50] ^= 0x01
    (slot_dir / "flipped.bin").write_bytes(bytes(flipped))
    (slot_dir / "llama.bin").write_bytes(b"GGSQ" + good[4:])  # not our format at all
    _foreign(slot_dir / "good.bin", slot_dir / "foreign.bin")
    for name in ["truncated.bin", "flipped.bin", "llama.bin", "foreign.bin", "missing.bin"]:
        r = action(server, 1, "restore", {"filename": name})
        assert r.status_code == 400, (name, r.text)
        error = r.json()["error"]
        assert error["param"] == "filename" and name in error["message"]
        assert error["message"].startswith("Unable to restore slot")
    assert "stale" in action(server, 1, "restore", {"filename": "foreign.bin"}).text
    assert "checksum" in action(server, 0, "restore", {"filename": "flipped.bin"}).text

    # slot 0 still holds its prompt, slot 1 the restored copy: erase 0, and 1 serves it
    assert ok(server, 0, "erase")["n_erased"] == saved["n_saved"]
    after = complete(server)
    assert after["timings"]["cache_n"] == n_prompt - 1
    assert after["content"] == first["content"]


@pytest.mark.parametrize(
    ("slot", "act", "body", "param"),
    [
        (0, "save", {"filename": "../x"}, "filename"),
        (0, "save", {"filename": "a/b"}, "filename"),
        (0, "save", {"filename": "a\\b"}, "filename"),
        (0, "restore", {"filename": ".."}, "filename"),
        (0, "save", {"filename": ""}, "filename"),
        (0, "save", {"filename": " x"}, "filename"),
        (0, "save", {"filename": 3}, "filename"),
        (0, "save", {"name": "x"}, "filename"),
        (0, "save", None, "filename"),
        (0, "load", {"filename": "x"}, "action"),
        (0, "", {"filename": "x"}, "action"),
        ("x", "save", {"filename": "x"}, "id_slot"),
        (2, "save", {"filename": "x"}, "id_slot"),
        (-1, "erase", None, "id_slot"),
    ],
)
def test_bad_requests_are_400s(
    server: LiveServer, slot_dir: Path, slot: int | str, act: str, body: Any, param: str
) -> None:
    r = action(server, slot, act, body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
    assert not (slot_dir.parent / "x").exists() and not (slot_dir / "a").exists()
    assert r.json()["error"]["type"] == "invalid_request_error"


def _processing(server: LiveServer) -> int:
    for _ in range(400):
        slots = HTTP.get(f"{server.base_url}/slots").json()
        busy = [s["id"] for s in slots if s["is_processing"]]
        if busy:
            return int(busy[0])
        time.sleep(0.02)
    raise AssertionError("no slot processed the stream")


def test_a_busy_slot_is_refused(server: LiveServer) -> None:
    body = {"prompt": PROMPT, "n_predict": 500, "ignore_eos": True, "stream": True}
    with HTTP.stream("POST", f"{server.base_url}/completion", json=body) as stream:
        lines = stream.iter_lines()
        next(line for line in lines if line.startswith("data:"))
        busy = _processing(server)
        for act, payload in [("save", {"filename": "busy.bin"}), ("erase", None)]:
            r = action(server, busy, act, payload)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "slot_busy"
    for _ in range(400):  # the closed stream frees its slot within a step
        if not any(s["is_processing"] for s in HTTP.get(f"{server.base_url}/slots").json()):
            break
        time.sleep(0.02)
    assert ok(server, busy, "save", "busy.bin")["n_saved"] > 0
    assert complete(server)["tokens"]


def test_without_slot_save_path_actions_are_refused() -> None:
    plain = _start(None, parallel=1, ctx_size=512)
    try:
        for act in ("save", "restore", "erase"):
            r = action(plain, 0, act, {"filename": "x.bin"})
            assert r.status_code == 501, r.text
            error = r.json()["error"]
            assert error["message"] == (
                "This server does not support slots action. Start it with `--slot-save-path`"
            )
            assert error["type"] == "not_supported_error"
    finally:
        plain.handle.stop()
