"""How a model's server starts and what it says: forked from the pool's one pre-imported
zygote (a fresh process where forking is off), its exit reported through the zygote, and
its log lines forwarded to the router's log under the model's id."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable

import httpx
import psutil
import pytest

from backend.router.child_log import forward_line
from backend.router.child_server import ChildServer
from backend.router.model_pool import ModelPool

pytestmark = pytest.mark.model

CHILD_LOG = "backend.router.child_log"


async def _complete(child: ChildServer, model: str) -> int:
    async with httpx.AsyncClient(timeout=120) as client:
        r = await client.post(
            f"{child.base_url}/v1/completions",
            json={"model": model, "prompt": "Hello", "max_tokens": 2},
            headers=child.headers,
        )
        return r.status_code


def test_servers_fork_from_one_zygote_and_their_exits_are_reported(
    make_pool: Callable[..., ModelPool],
) -> None:
    async def scenario() -> None:
        pool = make_pool()
        try:
            alpha = await pool.load("alpha")
            beta = await pool.load("beta")
            assert alpha.child is not None and beta.child is not None
            parents = {psutil.Process(e.child.pid).ppid() for e in (alpha, beta)}  # type: ignore[union-attr]
            (zygote,) = parents
            assert zygote != os.getpid()
            assert "backend.entrypoints.serve_zygote" in psutil.Process(zygote).cmdline()
            assert psutil.Process(alpha.child.pid).name() == "quantdesk-serve"
            assert await _complete(alpha.child, "alpha") == 200
            assert await _complete(beta.child, "beta") == 200
            child = alpha.child
            await pool.unload("alpha")  # SIGTERM: uvicorn shuts down, then re-raises it
            assert child.process.returncode == -signal.SIGTERM
            assert not psutil.pid_exists(child.pid) or (
                psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE
            )
            killed = beta.child
            os.kill(killed.pid, signal.SIGKILL)
            while beta.state != "failed":
                await asyncio.sleep(0.05)
            assert killed.process.returncode == -signal.SIGKILL
            assert f"code {-signal.SIGKILL}" in (beta.error or "")
        finally:
            await pool.close()
        assert not psutil.pid_exists(zygote)

    asyncio.run(scenario())


def test_a_fresh_process_where_forking_is_off(make_pool: Callable[..., ModelPool]) -> None:
    async def scenario() -> None:
        pool = make_pool(fork_servers=False)
        try:
            async with pool.acquire("alpha") as child:
                assert psutil.Process(child.pid).ppid() == os.getpid()
                assert await _complete(child, "alpha") == 200
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_a_servers_log_lines_reach_the_router_log_with_its_model_id(
    make_pool: Callable[..., ModelPool], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CHILD_LOG)

    async def scenario() -> None:
        pool = make_pool()
        try:
            entry = await pool.load("alpha")
            assert entry.child is not None
            await pool.unload("alpha")  # forwards what was left unread
        finally:
            await pool.close()

    asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records if r.name == CHILD_LOG]
    assert any(
        line.startswith("[alpha] backend.server.runner: server listening on") for line in lines
    )
    assert "[alpha] backend.server.app_factory: ready: serving alpha" in lines
    # each line once, in the order the child wrote them
    assert len(lines) == len(set(lines))
    assert lines.index(next(x for x in lines if "listening" in x)) < lines.index(
        "[alpha] backend.server.app_factory: ready: serving alpha"
    )


def test_a_forwarded_line_keeps_the_childs_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=CHILD_LOG)
    forward_line("m", "2026-12-01 14:35:47,649 WARNING backend.engine: slow step\n")
    forward_line("m", "2026-12-01 14:35:47,650 ERROR backend.server: model load failed: x")
    forward_line("m", "llama.cpp said something of its own")
    forward_line("m", "   ")
    got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == CHILD_LOG]
    assert got == [
        (logging.WARNING, "[m] backend.engine: slow step"),
        (logging.ERROR, "[m] backend.server: model load failed: x"),
        (logging.INFO, "[m] llama.cpp said something of its own"),
    ]
