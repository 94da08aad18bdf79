"""The model pool on real child servers: one load per model, LRU eviction by memory that
never takes a busy model, a killed child marked failed and loaded again."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.fit.memory_probe import probe_memory
from backend.router.child_server import ChildServer
from backend.router.errors import (
    InsufficientMemoryError,
    ModelLoadFailedError,
    ModelNotLoadedError,
    UnknownModelError,
)
from backend.router.memory_check import estimate_need
from backend.router.model_catalog import CatalogEntry, ModelCatalog
from backend.router.model_pool import ModelPool
from tests.router.conftest import EMBEDDED

pytestmark = pytest.mark.model

COMPLETION = {"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}


async def _complete(child: ChildServer, model: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=120) as client:
        return await client.post(
            f"{child.base_url}/v1/completions",
            json={**COMPLETION, "model": model},
            headers=child.headers,
        )


def test_eight_simultaneous_first_requests_cause_one_load(
    make_pool: Callable[..., ModelPool],
) -> None:
    async def scenario() -> None:
        pool = make_pool()
        try:

            async def use() -> tuple[int, int, str]:
                async with pool.acquire("alpha") as child:
                    r = await _complete(child, "alpha")
                    return child.pid, r.status_code, r.json()["model"]

            results = await asyncio.gather(*(use() for _ in range(8)))
            entry = pool.entry("alpha")
            assert entry.loads == 1
            assert len({pid for pid, _, _ in results}) == 1
            assert {(status, model) for _, status, model in results} == {(200, "alpha")}
            assert entry.state == "loaded" and entry.in_flight == 0
            assert [e.model_id for e in pool.resident()] == ["alpha"]
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_failed_load_answers_every_waiter_with_the_same_error(
    make_pool: Callable[..., ModelPool],
) -> None:
    async def scenario() -> None:
        pool = make_pool()
        # llama.cpp refuses a quantised V cache without flash attention
        pool.store.set("beta", {"cache_type_v": "q4_0", "flash_attn": "off"})
        try:

            async def use() -> BaseException | None:
                try:
                    async with pool.acquire("beta"):
                        return None
                except Exception as exc:
                    return exc

            errors = await asyncio.gather(*(use() for _ in range(4)))
            assert isinstance(errors[0], ModelLoadFailedError)
            assert "flash attention" in str(errors[0])
            assert all(e is errors[0] for e in errors)
            entry = pool.entry("beta")
            assert entry.state == "failed" and entry.loads == 0
            assert "flash attention" in (entry.error or "")
            # fixed settings: the next request loads it
            pool.store.set("beta", {"flash_attn": "on"})
            async with pool.acquire("beta") as child:
                assert (await _complete(child, "beta")).status_code == 200
            assert entry.state == "loaded" and entry.loads == 1
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_per_model_settings_survive_an_on_demand_load(
    make_pool: Callable[..., ModelPool],
) -> None:
    async def scenario() -> None:
        pool = make_pool()
        pool.store.set("alpha", {"ctx_size": 1024, "parallel": 1})
        try:
            for model, n_ctx in (("alpha", 1024), ("beta", 512)):
                async with pool.acquire(model) as child:
                    async with httpx.AsyncClient(timeout=30) as client:
                        card = (
                            await client.get(f"{child.base_url}/v1/models", headers=child.headers)
                        ).json()["data"][0]
                    stats = await _stats(child)
                assert card["id"] == model
                assert stats["model"]["n_ctx"] == n_ctx
                assert stats["model"]["n_parallel"] == (1 if model == "alpha" else 2)
        finally:
            await pool.close()

    asyncio.run(scenario())


async def _stats(child: ChildServer) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.get(f"{child.base_url}/v1/stats", headers=child.headers)
    r.raise_for_status()
    data: dict[str, Any] = r.json()
    return data


def test_lru_eviction_by_memory_never_takes_a_model_in_flight(
    make_pool: Callable[..., ModelPool],
) -> None:
    async def scenario() -> None:
        probe = make_pool()
        need = estimate_need(probe.settings_for("alpha", probe.entry("alpha").path), probe_memory())
        await probe.close()
        # room for two of the three models, not three
        pool = make_pool(memory_budget=int(need.total * 2.5), memory_reserve=0)
        try:
            await pool.load("alpha")
            await pool.load("beta")  # alpha is now the least recently used
            async with pool.acquire("alpha") as alpha:
                await pool.load(EMBEDDED)  # evicts beta: alpha is in flight
                assert pool.entry("beta").state == "unloaded"
                assert pool.entry("alpha").state == "loaded" and alpha.alive
                assert (await _complete(alpha, "alpha")).status_code == 200
                async with pool.acquire(EMBEDDED):
                    # both residents busy: a third does not fit and nothing may go
                    with pytest.raises(InsufficientMemoryError) as info:
                        await pool.load("beta")
                    message = str(info.value)
                    assert "memory budget" in message and "needs" in message
                    assert pool.entry("beta").state == "failed"
            # idle again: beta takes the place of the least recently used, the embedded
            # model (its block ended before alpha's)
            await pool.load("beta")
            assert pool.entry(EMBEDDED).state == "unloaded"
            assert {e.model_id for e in pool.resident()} == {"alpha", "beta"}
            assert alpha.alive
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_models_max_evicts_the_least_recently_used(make_pool: Callable[..., ModelPool]) -> None:
    async def scenario() -> None:
        pool = make_pool(models_max=1, models_autoload=False)
        try:
            with pytest.raises(ModelNotLoadedError):
                async with pool.acquire("alpha"):
                    pass
            with pytest.raises(UnknownModelError) as info:
                async with pool.acquire("gamma"):
                    pass
            assert "alpha" in str(info.value) and EMBEDDED in str(info.value)
            await pool.load("alpha")
            await pool.load("beta")
            assert [e.model_id for e in pool.resident()] == ["beta"]
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_killed_child_is_marked_failed_and_loaded_again(
    make_pool: Callable[..., ModelPool],
) -> None:
    async def scenario() -> None:
        pool = make_pool()
        try:
            entry = await pool.load("alpha")
            assert entry.child is not None
            first = entry.child.pid
            os.kill(first, signal.SIGKILL)
            while entry.state != "failed":
                await asyncio.sleep(0.05)
            assert "exited unexpectedly" in (entry.error or "")
            assert entry.child is None and pool.resident() == []
            async with pool.acquire("alpha") as child:
                assert child.pid != first
                assert (await _complete(child, "alpha")).status_code == 200
            assert entry.state == "loaded" and entry.loads == 2
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_library_of_one_model_answers_to_any_name(smollm2_path: Path) -> None:
    """A fresh install's library holds the embedded model alone: a plugin's preset name
    (or none) reaches it, as it does a single-model server; with two models it is a 404."""
    one = ModelCatalog(None, [CatalogEntry(EMBEDDED, smollm2_path, 1)])
    assert one.find("gpt-4o").model_id == EMBEDDED
    assert one.find(None).model_id == EMBEDDED
    two = ModelCatalog(
        None, [CatalogEntry(EMBEDDED, smollm2_path, 1), CatalogEntry("other", smollm2_path, 1)]
    )
    with pytest.raises(UnknownModelError, match="gpt-4o"):
        two.find("gpt-4o")
