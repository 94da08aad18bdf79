"""The load generator against the real ``quantdesk serve`` on the embedded SmolLM2."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.bench import BenchConfig, run_benchmark, write_plot, write_results_json
from backend.bench.config import Endpoint

pytestmark = pytest.mark.slow  # starts a real server and generates; ~20 s idle, more when busy


@pytest.fixture(scope="module")
def quantdesk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("serve")
    port_file = folder / "port"
    log = (folder / "serve.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backend.entrypoints.main",
            "serve",
            "--model",
            "default",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "-np",
            "2",
            "-t",
            "1",
            "-c",
            "2048",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        url = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, (folder / "serve.log").read_text()[-2000:]
            if url is None and port_file.is_file() and port_file.read_text().strip():
                url = f"http://127.0.0.1:{int(port_file.read_text())}"
            if url is not None:
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.3)
        else:
            pytest.fail("quantdesk serve did not become healthy in 120 s")
        assert url is not None
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_bench_against_quantdesk_serve(
    quantdesk_server: str, endpoint: Endpoint, tmp_path: Path
) -> None:
    # small on purpose: the point is exact accounting against the real server, not speed
    config = BenchConfig(
        url=quantdesk_server,
        label="ours",
        endpoint=endpoint,
        concurrency=(1, 2) if endpoint == "completions" else (2,),
        repetitions=2 if endpoint == "completions" else 1,
        requests_per_client=1,
        prompt_tokens=24,
        max_tokens=8,
        shared_prefix_tokens=200,
        warmup=endpoint == "chat",
    )
    result = run_benchmark(config)
    assert result.model == "SmolLM2-135M-Instruct"
    assert result.notes == []  # usage streamed, no early stops, no errors
    for scenario in result.scenarios:
        for level in scenario.levels:
            for rep in level.repetitions:
                assert rep.errors == 0 and rep.early_stops == 0
                assert rep.tokens_from_usage
                # ignore_eos: the tokens counted are exactly requests x max_tokens
                assert rep.generated_tokens == rep.requests * 8 == level.concurrency * 8
                assert rep.prompt_tokens_mean is not None
                if scenario.name == "plain":
                    assert 20 <= rep.prompt_tokens_mean <= 60
                else:
                    assert 220 <= rep.prompt_tokens_mean <= 280
                assert 0 < rep.ttft_ms_p50 <= rep.ttft_ms_p99
                assert 0 < rep.itl_ms_p50 <= rep.itl_ms_p99
                assert rep.tokens_per_s > 0
    json_path = write_results_json([result], tmp_path / "ours.json")
    png_path = write_plot([result], tmp_path / "ours.png")
    assert json_path.stat().st_size > 500
    assert png_path.read_bytes()[:4] == b"\x89PNG"
