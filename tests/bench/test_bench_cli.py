"""``quantdesk bench`` end to end against a real streaming HTTP server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.entrypoints.main import main

from .stream_server import stream_server


def test_bench_cli_progress_jsonl_writes_json_and_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    with stream_server() as (url, state):
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "1,2",
                "--reps",
                "2",
                "--prompt-tokens",
                "12",
                "--max-tokens",
                "6",
                "--shared-prefix-tokens",
                "40",
                "--out",
                str(out),
                "--label",
                "tiny server",
                "--progress-jsonl",
            ]
        )
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    progress = [obj for obj in lines if obj["type"] == "progress"]
    assert progress and all({"stage", "done", "total", "message"} <= set(p) for p in progress)
    assert max(p["done"] for p in progress) == progress[0]["total"] == 2 * 2 * 2
    result = lines[-1]
    assert result["type"] == "result"
    json_path, png_path = Path(result["json"]), Path(result["png"])
    assert json_path.parent == out and png_path.parent == out
    assert "tiny_server" in json_path.name
    assert png_path.read_bytes()[:4] == b"\x89PNG"
    saved = json.loads(json_path.read_text())["results"][0]
    assert saved == result["result"]
    total_tokens = sum(lv["generated_tokens"] for s in saved["scenarios"] for lv in s["levels"])
    timed_requests = 2 * 2 * (1 * 2 + 2 * 2)
    assert total_tokens == timed_requests * 6
    assert len(state.bodies) == timed_requests + 2 * 2  # plus one warm-up wave per scenario
    assert sorted(p.name for p in out.iterdir()) == sorted([json_path.name, png_path.name])


def test_bench_cli_table_and_error_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with stream_server() as (url, _state):
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "2",
                "--reps",
                "1",
                "--max-tokens",
                "4",
                "--shared-prefix-tokens",
                "0",
                "--no-warmup",
                "--out",
                str(tmp_path),
            ]
        )
    captured = capsys.readouterr()
    assert code == 0
    assert "tok/s" in captured.out and "plain" in captured.out
    assert "TTFT p99" in captured.out

    with stream_server() as (url, _state):
        dead = url
    code = main(["bench", dead, "--concurrency", "1", "--reps", "1", "--out", str(tmp_path)])
    assert code != 0
    assert "cannot reach" in capsys.readouterr().err


def test_bench_cli_rejects_bad_concurrency(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "http://127.0.0.1:1", "--concurrency", "1,x"])
    assert exc.value.code == 2
    assert "1,4,8,16" in capsys.readouterr().err


def test_bench_cli_new_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with stream_server() as (url, state):
        code = main(
            [
                "bench",
                url,
                "--concurrency",
                "2",
                "--reps",
                "1",
                "--max-tokens",
                "3",
                "--scenarios",
                "follow-up,edit,story",
                "--turns",
                "2",
                "--turn-tokens",
                "5",
                "--edit-max-tokens",
                "7",
                "--story-max-tokens",
                "6",
                "--no-warmup",
                "--out",
                str(tmp_path),
            ]
        )
    captured = capsys.readouterr()
    assert code == 0
    assert "follow-up t2" in captured.out and "story" in captured.out
    saved = json.loads(next(tmp_path.glob("*.json")).read_text())["results"][0]
    assert [s["name"] for s in saved["scenarios"]] == ["follow-up", "edit", "story"]
    assert saved["config"]["extra_scenarios"] == ["follow-up", "edit", "story"]
    follow_up = saved["scenarios"][0]["levels"][0]
    assert [t["turn"] for t in follow_up["turns"]] == [1, 2]
    # 2 conversations x 2 turns, then 2 clients x 2 requests of edit and of story
    assert len(state.bodies) == 4 + 4 + 4
    assert [b["max_tokens"] for b in state.bodies[4:]] == [7] * 4 + [6] * 4


def test_bench_cli_rejects_unknown_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "http://127.0.0.1:1", "--scenarios", "plain,nope"])
    assert exc.value.code == 2
    assert "follow-up" in capsys.readouterr().err
