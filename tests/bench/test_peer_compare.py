"""benchmarks/peer_compare.py: ratios vs llama-server, tables and the ratio plot."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from backend.bench import BenchConfig, BenchResult, run_benchmark
from benchmarks import peer_args, peer_compare, peer_ratios, peer_servers

from .stream_server import StreamServerOptions, stream_server


def _bench(label: str, token_delay_s: float) -> BenchResult:
    config = BenchConfig(
        url="http://127.0.0.1:1",
        label=label,
        concurrency=(1, 2),
        repetitions=3,
        requests_per_client=1,
        prompt_tokens=8,
        max_tokens=12,
        shared_prefix_tokens=20,
        warmup=False,
    )
    opts = StreamServerOptions(first_token_delay_s=0.02, token_delay_s=token_delay_s)
    with stream_server(opts) as (url, _state):
        return run_benchmark(replace(config, url=url))


def test_ratios_against_the_baseline(tmp_path: Path) -> None:
    fast = _bench("llama-server", token_delay_s=0.01)
    slow = _bench("ours", token_delay_s=0.05)
    table = peer_ratios.ratios([slow, fast])
    assert set(table) == {"ours"}
    assert set(table["ours"]) == {"plain", "shared-prefix"}
    for rows in table["ours"].values():
        assert [row["concurrency"] for row in rows] == [1, 2]
        for row in rows:
            # 5x slower tokens: well below the baseline's throughput, far longer gaps
            # (loose bounds: a busy machine stretches the fast server's sleeps the most)
            assert 0.1 < row["tokens_per_s"] < 0.8
            assert 1.5 < row["itl_ms_p50"] < 6.0
    paired = peer_ratios.paired_ratios([slow, fast])
    for rows in paired["ours"].values():
        assert [row["concurrency"] for row in rows] == [1, 2]
        for row in rows:
            assert len(row["ratios"]) == 3 and row["share_at_least_one"] == 0.0
            assert 0.1 < row["interval"][0] <= row["median"] <= row["interval"][1] < 0.8
    assert "ours" in peer_ratios.paired_table(paired)
    text = peer_ratios.ratio_table(table)
    assert "ours" in text and "shared-prefix" in text
    png = peer_ratios.write_ratio_plot(table, tmp_path / "ratios.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    with_bars = peer_ratios.write_ratio_plot(table, tmp_path / "paired.png", paired)
    assert with_bars.read_bytes()[:4] == b"\x89PNG"
    assert peer_ratios.ratios([slow]) == {}  # no baseline, no ratios


def test_free_port_and_ctx_defaults() -> None:
    port = peer_servers.free_port()
    assert 1024 < port < 65536
    args = peer_compare.parse_args(["-np", "4"])
    assert args.parallel == 4 and args.threads == 2
    assert args.concurrency == "1,4,8,16" and args.reps == 3
    with pytest.raises(SystemExit):
        peer_compare.parse_args(["--reps", "x"])


def _follow_up(label: str, first_token_delay_s: float) -> BenchResult:
    config = BenchConfig(
        url="http://127.0.0.1:1",
        label=label,
        concurrency=(1,),
        repetitions=3,
        max_tokens=3,
        include_plain=False,
        shared_prefix_tokens=0,
        extra_scenarios=("follow-up",),
        turns=2,
        turn_tokens=5,
        warmup=False,
    )
    opts = StreamServerOptions(first_token_delay_s=first_token_delay_s, token_delay_s=0.001)
    with stream_server(opts) as (url, _state):
        return run_benchmark(replace(config, url=url))


def test_follow_up_ratios_per_turn() -> None:
    fast = _follow_up("llama-server", first_token_delay_s=0.02)
    slow = _follow_up("ours", first_token_delay_s=0.1)
    table = peer_ratios.ratios([slow, fast])
    (row,) = table["ours"]["follow-up"]
    assert [t["turn"] for t in row["turns"]] == [1, 2]
    # 5x the time to first token (loose: a busy machine stretches the short sleeps most)
    assert all(2.0 < t["ttft_ms_p50"] < 6.0 for t in row["turns"])
    paired = peer_ratios.paired_turn_ratios([slow, fast])
    (prow,) = paired["ours"]["follow-up"]
    for turn in prow["turns"]:
        assert len(turn["ttft_ms_p99"]["ratios"]) == 3
        assert 2.0 < turn["ttft_ms_p50"]["median"] < 6.0
    text = peer_ratios.turn_table(paired)
    assert "ours" in text and " t2 " in text
    assert "follow-up t2" in peer_ratios.ratio_table(table)
    assert peer_ratios.paired_turn_ratios([slow]) == {}


def test_server_flags_and_scenarios_from_the_command_line(tmp_path: Path) -> None:
    args = peer_compare.parse_args(
        [
            "--servers",
            "ours,ours-b,llama-server",
            "--ours-flags",
            "--spec-type ngram-simple --spec-draft-n-max 16",
            "--ours-b-flags=--kv-unified",
            "--llama-server-flags",
            "--spec-type ngram-simple",
            "--scenarios",
            "edit,follow-up",
        ]
    )
    assert args.scenarios == ("edit", "follow-up")
    specs = peer_args.server_specs(args, tmp_path / "m.gguf")
    knobs = peer_servers.Knobs(tmp_path / "m.gguf", 2, 4, 4096, 512, 512)
    ours = specs["ours"].command(knobs, 8080)
    assert ours[-4:] == ["--spec-type", "ngram-simple", "--spec-draft-n-max", "16"]
    assert specs["ours-b"].command(knobs, 8080)[-1] == "--kv-unified"
    assert specs["ours-b"].command(knobs, 8080)[:-1] == specs["ours"].argv(knobs, 8080)
    assert specs["llama-server"].command(knobs, 8080)[-2:] == ["--spec-type", "ngram-simple"]
    assert specs["llama-cpp-python"].extra_flags == []
