"""An idle TTL unloads a model and gives its memory back: the model's server process ends,
and the router itself keeps no more than a small bound of what it had before the load."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from backend.hub.library import ModelLibrary
from tests.router.conftest import model_servers
from tests.server.conftest import child_base_url, wait_healthy

pytestmark = pytest.mark.model

# What the router process may keep after a model has come and gone: its pooled upstream
# connections, the model's log and state, allocator slack. A model's server is 200+ MiB.
ROUTER_GROWTH_BOUND = 32 << 20
SMALL = ["-c", "512", "-np", "1", "-t", "1"]


@pytest.fixture
def router(library: ModelLibrary, tmp_path: Path) -> Iterator[tuple[str, psutil.Process]]:
    port_file = tmp_path / "port"
    log_path = tmp_path / "router.log"
    argv = [sys.executable, "-m", "backend.entrypoints.main", "serve", "--port", "0"]
    argv += ["--port-file", str(port_file), "--models-dir", str(library.root), *SMALL]
    with log_path.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            base = child_base_url(proc, port_file)  # type: ignore[arg-type]
            wait_healthy(base)
            yield base, psutil.Process(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def _state(base: str) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in httpx.get(f"{base}/v1/models", timeout=30).json()["data"]}


def _ask(base: str, model: str, **extra: Any) -> None:
    body = {"model": model, "prompt": "Once upon a time", "max_tokens": 8, **extra}
    r = httpx.post(f"{base}/v1/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text


def test_a_request_ttl_unloads_its_model_and_gives_the_memory_back(
    router: tuple[str, psutil.Process], tmp_path: Path
) -> None:
    base, proc = router
    for _ in range(3):  # warm the router's own code paths before the baseline
        _state(base)
    before = proc.memory_info().rss
    _ask(base, "alpha", ttl=1)  # LM Studio's per-request TTL; the router has none
    (alpha,) = model_servers(proc)
    alpha_rss = alpha.memory_info().rss
    _ask(base, "beta")
    beta = _state(base)["beta"]
    (beta_child,) = [c for c in model_servers(proc) if c.pid != alpha.pid]
    beta_rss = beta_child.memory_info().rss
    while _state(base)["alpha"]["status"]["value"] != "unloaded":
        time.sleep(0.2)
    # alpha's server has ended (and was reaped); beta's, without a TTL, stays
    assert not alpha.is_running()
    assert model_servers(proc) == [beta_child]
    assert _state(base)["beta"]["status"]["value"] == "loaded"
    after = proc.memory_info().rss
    print(
        f"router RSS before {before >> 20} MiB, after {after >> 20} MiB; model servers "
        f"{alpha_rss >> 20} and {beta_rss >> 20} MiB; estimate "
        f"{beta['memory_bytes'] >> 20} MiB"
    )
    assert after - before <= ROUTER_GROWTH_BOUND
    # quantdesk serve's own output carries each model server's lines, under its id
    said = (tmp_path / "router.log").read_text()
    for model in ("alpha", "beta"):
        prefix = f"INFO backend.router.child_log: [{model}] backend.server"
        assert f"{prefix}.runner: server listening on" in said
        assert f"{prefix}.app_factory: ready: serving {model}" in said
    # the estimate the pool admits a model with covers what its server really holds
    assert max(alpha_rss, beta_rss) <= beta["memory_bytes"]
