"""The follow-up, edit and story scenarios against a real HTTP streaming stand-in."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest

from backend.bench import BenchConfig, BenchError, BenchResult, run_benchmark
from backend.bench.scenario_names import parse_scenarios
from backend.bench.sessions import CODE_BLOCK_OPENER
from backend.bench.task_prompts import code_file, edit_answer_similarity

from .stream_server import StreamServerOptions, stream_server


def _config(url: str, *scenarios: str, **overrides: object) -> BenchConfig:
    base: dict[str, object] = {
        "url": url,
        "concurrency": (1, 2),
        "repetitions": 2,
        "max_tokens": 4,
        "include_plain": False,
        "shared_prefix_tokens": 0,
        "extra_scenarios": scenarios,
        "warmup": False,
        "turns": 3,
        "turn_tokens": 10,
    }
    base.update(overrides)
    return BenchConfig(**base)  # type: ignore[arg-type]


def _tagged_answer(prompt: str) -> list[str]:
    """Pieces that name the prompt they answer, so a test can tell which answer came back."""
    tag = hashlib.sha1(prompt.encode()).hexdigest()[:8]
    return [f" {tag}-{i}" for i in range(50)]


def test_follow_up_resends_each_answer_and_times_every_turn() -> None:
    opts = StreamServerOptions(answer=_tagged_answer, prefill_s_per_word=0.002)
    with stream_server(opts) as (url, state):
        result = run_benchmark(_config(url, "follow-up"))

    # one conversation of 3 turns per client: (1 + 2 clients) x 2 repetitions x 3 turns
    assert len(state.bodies) == 3 * 2 * 3
    by_turn: dict[int, list[dict[str, Any]]] = {1: [], 2: [], 3: []}
    for body in state.bodies:
        messages = body["messages"]
        assert body["ignore_eos"] is True and body["max_tokens"] == 4
        assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + [
            "user"
        ]
        by_turn[len(messages) // 2 + 1].append(body)
    assert [len(bodies) for bodies in by_turn.values()] == [6, 6, 6]
    for turn in (2, 3):
        for body in by_turn[turn]:
            earlier = body["messages"][:-2]
            previous = next(b for b in by_turn[turn - 1] if b["messages"] == earlier)
            # the assistant's message is the very answer turn k-1 streamed
            prompt = " ".join(m["content"] for m in previous["messages"])
            assert body["messages"][-2]["content"] == "".join(_tagged_answer(prompt)[:4])
    users = [b["messages"][-1]["content"] for b in state.bodies]
    assert len(set(users)) == len(users), "every turn of every conversation has fresh text"
    assert all(9 <= len(u.split()) <= 11 for u in users)

    scenario = result.scenarios[0]
    assert scenario.name == "follow-up"
    for level in scenario.levels:
        for rep in level.repetitions:
            assert rep.requests == 3 * level.concurrency and rep.errors == rep.early_stops == 0
            assert rep.generated_tokens == rep.requests * 4 and rep.tokens_per_s > 0
            assert len(rep.turn_ttft_ms_p50) == len(rep.turn_ttft_ms_p99) == 3
            prompts = rep.turn_prompt_tokens_mean
            assert prompts[0] == 10 and prompts[1] == 10 + 4 + 10 and prompts[2] == 38
            # the stand-in has no cache: each turn prefills the whole, longer conversation
            assert rep.turn_ttft_ms_p50[0] < rep.turn_ttft_ms_p50[2]
        turns = level.turns()
        assert [t["turn"] for t in turns] == [1, 2, 3]
        assert all(t["ttft_ms_p50"] <= t["ttft_ms_p99"] for t in turns)

    data = json.loads(json.dumps(result.to_dict()))
    level_json = data["scenarios"][0]["levels"][1]
    assert [t["turn"] for t in level_json["turns"]] == [1, 2, 3]
    restored = BenchResult.from_dict(data)
    again, before = restored.scenarios[0].levels[1].turns(), scenario.levels[1].turns()
    assert len(again) == len(before) == 3
    for a, b in zip(again, before, strict=True):
        assert a == pytest.approx(b, abs=0.01)


def _echo_file(prompt: str) -> list[str]:
    """Answer with the prompt's code file, unchanged, line by line."""
    code = prompt.split("```python\n", 1)[1].split("```", 1)[0]
    return [line + "\n" for line in code.splitlines()]


def test_edit_sends_the_file_lets_the_model_stop_and_scores_the_answer() -> None:
    with stream_server(StreamServerOptions(answer=_echo_file)) as (url, state):
        result = run_benchmark(_config(url, "edit", edit_max_tokens=300))

    assert len(state.bodies) == 2 * (1 * 2 + 2 * 2)
    firsts = set()
    for body in state.bodies:
        prompt = body["prompt"]
        assert "ignore_eos" not in body and body["max_tokens"] == 300
        assert body["temperature"] == 0.0
        assert prompt.endswith(CODE_BLOCK_OPENER)
        code = prompt.split("```python\n", 1)[1].split("```", 1)[0]
        assert "class " in code and code.count("    def ") >= 6
        assert 1300 <= len(code) <= 1700  # ~400 tokens; test_code_file_size counts them
        firsts.add(code.splitlines()[0])
    assert len(firsts) == len(state.bodies), "every request edits a different file"
    for level in result.scenarios[0].levels:
        for rep in level.repetitions:
            # answers end where the "model" stopped, short of max_tokens: no early stop
            assert rep.errors == rep.early_stops == 0
            assert 40 * rep.requests < rep.generated_tokens < 300 * rep.requests
            # the echo misses the rename on 3 of ~45 lines
            assert rep.output_similarity is not None and 0.85 < rep.output_similarity < 1.0
    assert not any("stopped before" in note for note in result.notes)


def test_edit_on_the_chat_api_asks_in_a_user_message() -> None:
    with stream_server() as (url, state):
        run_benchmark(
            _config(
                url, "edit", concurrency=(1,), repetitions=1, requests_per_client=1, endpoint="chat"
            )
        )
    (body,) = state.bodies
    (message,) = body["messages"]
    assert message["role"] == "user" and "```python\n" in message["content"]
    assert message["content"].endswith("nothing else.")


def test_edit_answer_similarity() -> None:
    task = code_file(400, "k")
    assert task.code.count(task.old_name) == 3 and task.old_name not in task.expected
    assert edit_answer_similarity(task, task.expected + "```\nDone.", block_open=True) == 1.0
    chat = f"Here it is:\n```python\n{task.expected}```\nAnything else?"
    assert edit_answer_similarity(task, chat, block_open=False) == 1.0
    assert 0.85 < edit_answer_similarity(task, task.code, block_open=True) < 1.0
    assert edit_answer_similarity(task, "x = 1\n" * 40, block_open=True) < 0.1


def test_story_has_a_fixed_length_and_fresh_prompts() -> None:
    with stream_server() as (url, state):
        result = run_benchmark(_config(url, "story", story_max_tokens=12))
    prompts = [b["prompt"] for b in state.bodies]
    assert len(prompts) == 2 * (1 * 2 + 2 * 2) and len(set(prompts)) == len(prompts)
    assert all(p.startswith("Write a short story about ") for p in prompts)
    assert all(b["ignore_eos"] is True and b["max_tokens"] == 12 for b in state.bodies)
    for level in result.scenarios[0].levels:
        for rep in level.repetitions:
            assert rep.generated_tokens == rep.requests * 12 and rep.early_stops == 0
            assert not rep.turn_ttft_ms_p50 and rep.output_similarity is None


def test_scenario_selection_and_sizes() -> None:
    assert parse_scenarios("plain,prefix,followup") == ("plain", "shared-prefix", "follow-up")
    assert parse_scenarios("all")[-3:] == ("follow-up", "edit", "story")
    with pytest.raises(BenchError, match="unknown scenario"):
        parse_scenarios("plain,bogus")
    config = BenchConfig(url="http://x", extra_scenarios=("edit", "follow-up"))
    assert [n for n, _ in config.scenarios()] == ["plain", "shared-prefix", "edit", "follow-up"]
    only = config.only("follow-up")
    assert [n for n, _ in only.scenarios()] == ["follow-up"]
    assert only.request_tokens_max() == 4 * (50 + 64 + 16) + 32
    assert config.only("shared-prefix").scenarios() == [("shared-prefix", 1000)]
    assert config.fixed_tokens("edit") is None and config.fixed_tokens("story") == 256
    with pytest.raises(BenchError, match="unknown scenario"):
        BenchConfig(url="http://x", extra_scenarios=("plain",)).validate()
    assert math.isfinite(BenchConfig(url="http://x").request_tokens_max())
