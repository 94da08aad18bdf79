"""The load generator against a real HTTP streaming server with known timings."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import pytest

from backend.bench import (
    BenchCancelled,
    BenchConfig,
    BenchError,
    BenchProgress,
    BenchResult,
    run_benchmark,
    write_plot,
    write_results_json,
)

from .stream_server import StreamServerOptions, stream_server

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _config(url: str, **overrides: object) -> BenchConfig:
    base: dict[str, object] = {
        "url": url,
        "label": "tiny",
        "concurrency": (1, 3),
        "repetitions": 2,
        "requests_per_client": 2,
        "prompt_tokens": 16,
        "max_tokens": 8,
        "shared_prefix_tokens": 50,
    }
    base.update(overrides)
    return BenchConfig(**base)  # type: ignore[arg-type]


def test_counts_timings_and_prompts() -> None:
    opts = StreamServerOptions(first_token_delay_s=0.03, token_delay_s=0.004)
    with stream_server(opts) as (url, state):
        result = run_benchmark(_config(url))

    assert result.model == "tiny-test-model"
    assert [s.name for s in result.scenarios] == ["plain", "shared-prefix"]
    for scenario in result.scenarios:
        assert [lv.concurrency for lv in scenario.levels] == [1, 3]
        for level in scenario.levels:
            assert len(level.repetitions) == 2
            for rep in level.repetitions:
                assert rep.requests == level.concurrency * 2
                assert rep.errors == 0 and rep.early_stops == 0
                assert rep.tokens_from_usage
                # fixed output length: every request produced exactly max_tokens
                assert rep.generated_tokens == rep.requests * 8
                assert rep.tokens_per_s == pytest.approx(rep.generated_tokens / rep.wall_s)
                assert rep.requests_per_s == pytest.approx(rep.requests / rep.wall_s)
                # the server waits 30 ms before the first token and 4 ms between tokens
                assert 30.0 <= rep.ttft_ms_p50 <= rep.ttft_ms_p99 < 2000.0
                assert 3.5 <= rep.itl_ms_p50 <= rep.itl_ms_p99 < 1000.0
            assert level.tokens_per_s == pytest.approx(
                sorted(r.tokens_per_s for r in level.repetitions)[0] / 2
                + sorted(r.tokens_per_s for r in level.repetitions)[1] / 2
            )

    # warm-up (3 requests per scenario) + timed waves (1*2 + 3*2 per rep, 2 reps) per scenario
    assert len(state.bodies) == 2 * (3 + 2 * (2 + 6))
    prompts = [b["prompt"] for b in state.bodies]
    assert len(set(prompts)) == len(prompts), "every request must carry a distinct prompt"
    assert all(b["ignore_eos"] is True and b["max_tokens"] == 8 for b in state.bodies)
    assert all(b["stream_options"] == {"include_usage": True} for b in state.bodies)

    plain = [b["prompt"] for b in state.bodies[:19]]
    assert all("\n\n" not in p and 14 <= len(p.split()) <= 16 for p in plain)
    prefixed = [b["prompt"] for b in state.bodies[19:]]
    prefixes = [p.split("\n\n")[0] for p in prefixed]
    assert all(len(p.split()) == 50 for p in prefixes)
    # warm-up: one prefix; then a fresh prefix per repetition shared by all its requests
    groups = [prefixes[:3], prefixes[3:5], prefixes[5:7], prefixes[7:13], prefixes[13:19]]
    assert all(len(set(g)) == 1 for g in groups)
    assert len({g[0] for g in groups}) == len(groups)


def test_chat_endpoint_puts_prefix_in_system_message() -> None:
    with stream_server() as (url, state):
        result = run_benchmark(
            _config(url, endpoint="chat", concurrency=(2,), repetitions=1, include_plain=False)
        )
    rep = result.scenarios[0].levels[0].repetitions[0]
    assert rep.generated_tokens == 4 * 8 and rep.errors == 0
    for body in state.bodies:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user"]
    assert len({b["messages"][0]["content"] for b in state.bodies[2:]}) == 1


def test_without_usage_counts_chunks_and_notes_it() -> None:
    with stream_server(StreamServerOptions(send_usage=False)) as (url, _state):
        result = run_benchmark(_config(url, concurrency=(2,), shared_prefix_tokens=0))
    for rep in result.scenarios[0].levels[0].repetitions:
        assert not rep.tokens_from_usage
        assert rep.generated_tokens == rep.requests * 8
    assert any("usage" in note for note in result.notes)


def test_early_stops_are_reported() -> None:
    opts = StreamServerOptions(honour_ignore_eos=False, natural_stop_after=5)
    with stream_server(opts) as (url, _state):
        result = run_benchmark(_config(url, concurrency=(2,), shared_prefix_tokens=0))
    for rep in result.scenarios[0].levels[0].repetitions:
        assert rep.early_stops == rep.requests == 4
        assert rep.generated_tokens == 4 * 5
    assert any("stopped before max_tokens=8" in note for note in result.notes)


def test_api_key_is_sent_and_a_wrong_one_is_a_clear_error() -> None:
    with stream_server(StreamServerOptions(api_key="s3cret")) as (url, _state):
        ok = run_benchmark(
            _config(url, api_key="s3cret", concurrency=(1,), repetitions=1, shared_prefix_tokens=0)
        )
        assert ok.scenarios[0].levels[0].repetitions[0].errors == 0
        with pytest.raises(BenchError, match="401"):
            run_benchmark(_config(url, api_key="wrong", concurrency=(1,), repetitions=1))
        # an explicit model id skips /v1/models; the 401 then comes from the requests
        with pytest.raises(BenchError, match="HTTP 401"):
            run_benchmark(_config(url, model="m", concurrency=(1,), repetitions=1))
    assert "s3cret" not in json.dumps(ok.to_dict())


def test_unreachable_server_is_a_clear_error() -> None:
    with stream_server() as (url, _state):
        dead = url  # the port is free again once the server is closed
    with pytest.raises(BenchError, match="cannot reach"):
        run_benchmark(_config(dead))


def test_invalid_settings_are_rejected() -> None:
    with pytest.raises(BenchError, match="concurrency"):
        run_benchmark(BenchConfig(url="http://127.0.0.1:1", concurrency=(0,)))
    with pytest.raises(BenchError, match="URL"):
        run_benchmark(BenchConfig(url="127.0.0.1:1"))
    with pytest.raises(BenchError, match="repetitions"):
        run_benchmark(BenchConfig(url="http://127.0.0.1:1", repetitions=0))


def test_progress_and_cancel() -> None:
    cancel = threading.Event()
    seen: list[BenchProgress] = []

    def on_progress(p: BenchProgress) -> None:
        seen.append(p)
        if p.stage == "plain" and p.done == 1:
            cancel.set()

    # slow tokens: a cancelled wave must stop well before it would finish
    opts = StreamServerOptions(token_delay_s=0.05)
    with stream_server(opts) as (url, _state):
        started = time.perf_counter()
        with pytest.raises(BenchCancelled):
            run_benchmark(_config(url, max_tokens=60, warmup=False), on_progress, cancel)
        elapsed = time.perf_counter() - started
    # rep 1 (2 requests x 60 tokens x 50 ms) takes ~6 s; the cancelled rep 2 stops at once
    assert elapsed < 6.0 + 4.0
    assert seen[0].total == 2 * 2 * 2 and seen[-1].done == 1


def test_json_round_trip_and_plot(tmp_path: Path) -> None:
    with stream_server() as (url, _state):
        result = run_benchmark(_config(url))
    json_path = write_results_json([result], tmp_path / "out" / "bench.json")
    png_path = write_plot([result, result], tmp_path / "out" / "bench.png", title="t")
    assert png_path.read_bytes()[:8] == PNG_MAGIC and png_path.stat().st_size > 10_000
    assert sorted(p.name for p in json_path.parent.iterdir()) == ["bench.json", "bench.png"]

    data = json.loads(json_path.read_text())
    restored = BenchResult.from_dict(data["results"][0])
    again = restored.to_dict()
    assert {k: v for k, v in again.items() if k != "scenarios"} == {
        k: v for k, v in data["results"][0].items() if k != "scenarios"
    }
    for s_new, s_old in zip(again["scenarios"], data["results"][0]["scenarios"], strict=True):
        for lv_new, lv_old in zip(s_new["levels"], s_old["levels"], strict=True):
            assert lv_new["repetitions"] == lv_old["repetitions"]
            assert lv_new["median"] == pytest.approx(lv_old["median"], abs=0.01)
    level = data["results"][0]["scenarios"][1]["levels"][1]
    assert level["concurrency"] == 3
    assert level["generated_tokens"] == 2 * 6 * 8
    assert level["median"]["tokens_per_s"] == pytest.approx(
        result.scenarios[1].levels[1].tokens_per_s, abs=1e-3
    )
    assert not math.isnan(level["median"]["ttft_ms_p99"])
