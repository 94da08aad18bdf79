"""The coding-agent scenario of issue 29: more sessions than slots, a long shared system
prompt, a context per session, interleaved turns. Prefill decides it.

Each of ``--sessions`` sessions sends ``--turns`` chat requests: turn 0 is the shared system
prompt (about ``--system-tokens``), the session's own context (about ``--session-tokens``)
and a question; each later turn adds the answer and a new message of about
``--turn-tokens``. The client runs turn 0 of every session, then turn 1 of every session,
and so on, ``--parallel`` requests at a time (the server's slots), so that between two turns
of a session the other sessions have used every slot: a server that keeps a session's KV
only in its slot prefills it again at every turn.

Figures per server and turn: TTFT median and p90 (client side, streamed), prompt tokens
evaluated by the server (ours: ``/v1/stats``; llama-server: each response's
``timings.prompt_n``), cached tokens reported in ``usage``; per run: wall time and peak RSS.
``--dialect anthropic`` sends the same turns as Claude Code does, on ``/v1/messages`` with
its ``x-anthropic-billing-header`` line (a new ``cch=`` stamp per request) first in the system
prompt. ``--restart`` adds the restart case: turn 0, the server restarted on the same
``QUANTDESK_HOME``, then turn 1 (only ours keeps a cache on disk). Every server start is
followed by one uncounted warm-up request that drafts, so that ours' one-off timing of its
decode rows (speculative decoding's cost policy) does not land in a measured turn.

Servers: ``ours`` (defaults: RAM and disk tiers on), ``ours-nocache`` (``--cache-ram 0
--cache-disk 0``), ``ours-before`` (``--ours-before TREE``: a checkout of QuantDesk before a
change; pair with ``--peer ours-before``), ``llama-server`` (``--llama-server PATH``, at its
defaults, ``-nr`` where ours runs without extra buffers). Each server runs ``--passes``
times; results go to ``--out`` as JSON.

    .venv/bin/python -m benchmarks.agent_sessions --servers ours,ours-nocache \\
        --sessions 8 --turns 3 --passes 1 --out benchmarks/results/agent-sessions
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from backend.bench.paired import bootstrap_median_interval
from backend.bench.prompts import shared_prefix, synthetic_text
from backend.settings.default_model import default_model_path
from benchmarks.cpu_path import ours_cpu_path, paths_record
from benchmarks.peer_servers import (
    DEFAULT_LLAMA_SERVER,
    Knobs,
    ServerSpec,
    llama_server_argv,
    ours_argv,
    ours_in,
    peak_rss,
    started,
)

QUESTIONS = [
    "Which function should change first, and why?",
    "Now rename the main variable and show the new lines.",
    "Add a docstring to that function.",
    "Write a one-line test for it.",
]


@dataclass
class TurnRecord:
    session: int
    turn: int
    ttft_s: float | None
    total_s: float
    prompt_tokens: int | None
    cached_tokens: int | None
    evaluated: int | None  # llama-server's timings.prompt_n
    text: str = ""
    error: str = ""


@dataclass
class RunResult:
    server: str
    pass_index: int
    wall_s: float
    peak_rss_bytes: int
    records: list[TurnRecord] = field(default_factory=list)
    evaluated_total: int | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    restart: bool = False


def session_context(i: int, n_tokens: int) -> str:
    return f"Session {i} works on file_{i}.py:\n" + synthetic_text(n_tokens, f"session:{i}")


def turn_message(i: int, turn: int, n_tokens: int) -> str:
    question = QUESTIONS[turn % len(QUESTIONS)]
    if turn == 0:
        return question
    return f"{synthetic_text(n_tokens, f'turn:{i}:{turn}')}\n{question}"


class Conversation:
    def __init__(self, i: int, system: str, args: argparse.Namespace) -> None:
        self.i = i
        self.messages: list[dict[str, str]] = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": f"{session_context(i, args.session_tokens)}\n\n"
                f"{turn_message(i, 0, args.turn_tokens)}",
            },
        ]

    def next_turn(self, answer: str, turn: int, n_tokens: int) -> None:
        self.messages.append({"role": "assistant", "content": answer})
        self.messages.append({"role": "user", "content": turn_message(self.i, turn, n_tokens)})


def _sse_data(client: httpx.Client, url: str, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The JSON of each ``data:`` line a streamed POST answers, until ``[DONE]``."""
    with client.stream("POST", url, json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            yield json.loads(data)


def stream_chat(
    client: httpx.Client, url: str, messages: list[dict[str, str]], max_tokens: int
) -> tuple[float | None, float, str, dict[str, Any]]:
    """(TTFT s, total s, text, last usage/timings seen)."""
    body = {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    ttft: float | None = None
    text: list[str] = []
    extra: dict[str, Any] = {}
    for chunk in _sse_data(client, f"{url}/v1/chat/completions", body):
        for choice in chunk.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text.append(piece)
        if chunk.get("usage"):
            extra["usage"] = chunk["usage"]
        if chunk.get("timings"):
            extra["timings"] = chunk["timings"]
    return ttft, time.perf_counter() - t0, "".join(text), extra


def billing_header(request_no: int) -> str:
    """The line Claude Code puts first in its system prompt: ``cch=`` differs per request."""
    stamp = f"{(request_no * 2654435761) % (1 << 20):05x}"
    return f"x-anthropic-billing-header: cc_version=2.1.160.a1f; cc_entrypoint=cli; cch={stamp};"


_requests_sent = iter(range(1 << 62))


def stream_messages(
    client: httpx.Client, url: str, messages: list[dict[str, str]], max_tokens: int
) -> tuple[float | None, float, str, dict[str, Any]]:
    """The same turn in Claude Code's shape on ``/v1/messages``: the system prompt as text
    blocks after a billing-header block of its own (a new ``cch=`` every request), streamed;
    ``usage`` in OpenAI's terms from the last of ``message_start`` and ``message_delta`` that
    counts input tokens (cache reads as cached tokens)."""
    system = [
        {"type": "text", "text": billing_header(next(_requests_sent))},
        {"type": "text", "text": messages[0]["content"], "cache_control": {"type": "ephemeral"}},
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "system": system,
        "messages": messages[1:],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
    }
    t0 = time.perf_counter()
    ttft: float | None = None
    text: list[str] = []
    extra: dict[str, Any] = {}
    for event in _sse_data(client, f"{url}/v1/messages", body):
        kind = event.get("type")
        usage = (event.get("message") or {}).get("usage") if kind == "message_start" else None
        if kind == "message_delta":  # the final counts, cache reads included
            usage = event.get("usage")
        if usage and "input_tokens" in usage:
            cached = usage.get("cache_read_input_tokens") or 0
            extra["usage"] = {
                "prompt_tokens": (usage.get("input_tokens") or 0) + cached,
                "prompt_tokens_details": {"cached_tokens": cached},
            }
        if kind == "content_block_delta":
            piece = (event.get("delta") or {}).get("text") or ""
            if piece:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text.append(piece)
        elif kind == "message_stop" and event.get("timings"):
            extra["timings"] = event["timings"]
    return ttft, time.perf_counter() - t0, "".join(text), extra


def _turn_worker(
    url: str,
    turn: int,
    jobs: queue.SimpleQueue[Conversation],
    args: argparse.Namespace,
    records: list[TurnRecord],
    lock: threading.Lock,
) -> None:
    with httpx.Client(timeout=httpx.Timeout(1800.0)) as client:
        while True:
            try:
                conv = jobs.get_nowait()
            except queue.Empty:
                return
            rec = TurnRecord(conv.i, turn, None, 0.0, None, None, None)
            try:
                stream = stream_messages if args.dialect == "anthropic" else stream_chat
                ttft, total, text, extra = stream(client, url, conv.messages, args.max_tokens)
                usage = extra.get("usage") or {}
                details = usage.get("prompt_tokens_details") or {}
                timings = extra.get("timings") or {}
                rec.ttft_s, rec.total_s, rec.text = ttft, total, text
                rec.prompt_tokens = usage.get("prompt_tokens")
                rec.cached_tokens = details.get("cached_tokens")
                rec.evaluated = timings.get("prompt_n")
                conv.next_turn(text, turn + 1, args.turn_tokens)
            except (httpx.HTTPError, ValueError) as exc:
                rec.error = str(exc)[:200]
            with lock:
                records.append(rec)


def run_turns(
    url: str,
    conversations: list[Conversation],
    turns: range,
    args: argparse.Namespace,
    records: list[TurnRecord],
) -> None:
    """Turn-major, ``args.parallel`` requests in flight."""
    lock = threading.Lock()
    for turn in turns:
        jobs: queue.SimpleQueue[Conversation] = queue.SimpleQueue()
        for conv in conversations:
            jobs.put(conv)
        threads = [
            threading.Thread(target=_turn_worker, args=(url, turn, jobs, args, records, lock))
            for _ in range(args.parallel)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


WARMUP = "Repeat this list exactly, one item per line: " + ", ".join(
    f"item {i} costs {3 * i} coins" for i in range(12)
)


def warm_up(url: str) -> None:
    """One request that drafts (ours times its decode rows the first time a draft needs a
    length, once per server start): not counted, and sharing no prefix with the sessions."""
    with httpx.Client(timeout=httpx.Timeout(1800.0)) as client:
        stream_chat(client, url, [{"role": "user", "content": WARMUP}], 64)


def server_spec(name: str, args: argparse.Namespace) -> ServerSpec:
    if name == "ours":
        return ServerSpec("ours", ours_argv)
    if name == "ours-nocache":
        return ServerSpec(
            "ours-nocache", ours_argv, extra_flags=["--cache-ram", "0", "--cache-disk", "0"]
        )
    if name == "llama-server":
        binary = Path(args.llama_server)
        if not binary.is_file():
            raise SystemExit(f"no llama-server at {binary}: benchmarks/build_llama_server.sh")
        return ServerSpec("llama-server", llama_server_argv(binary))
    if name == "ours-before" and args.ours_before:
        tree = Path(args.ours_before).resolve()
        return ServerSpec("ours-before", ours_in(tree), cwd=tree)
    raise SystemExit(f"unknown server {name!r}")


def our_stats(url: str) -> dict[str, Any]:
    try:
        return dict(httpx.get(f"{url}/v1/stats", timeout=10).json())
    except (httpx.HTTPError, ValueError):
        return {}


def one_run(
    spec: ServerSpec, knobs: Knobs, args: argparse.Namespace, pass_index: int, out: Path
) -> RunResult:
    system = shared_prefix(args.system_tokens, "agent-system")
    conversations = [Conversation(i, system, args) for i in range(args.sessions)]
    records: list[TurnRecord] = []
    home = tempfile.mkdtemp(prefix="agent-sessions-home-")
    os.environ["QUANTDESK_HOME"] = home  # a fresh, empty disk cache per run
    log = out / f"{spec.name}-pass{pass_index}{'-restart' if args.restart else ''}.log"
    peak = 0
    evaluated = 0
    stats: dict[str, Any] = {}
    t0 = time.perf_counter()
    phases = [range(0, 1), range(1, args.turns)] if args.restart else [range(args.turns)]
    for phase in phases:
        with started(spec, knobs, log, args.start_timeout) as (url, proc):
            warm_up(url)
            before = our_stats(url)
            with peak_rss({"server": psutil.Process(proc.pid)}) as peaks:
                run_turns(url, conversations, phase, args, records)
            after = our_stats(url)
            peak = max(peak, peaks["server"])
            if "tokens" in before and "tokens" in after:  # ours (llama-server has no such stats)
                evaluated += (
                    after["tokens"]["prompt_decoded_total"]
                    - before["tokens"]["prompt_decoded_total"]
                )
                stats = {k: after.get(k) for k in ("prefix_cache", "session_cache", "tokens")}
        log = log.with_name(log.stem + "-after-restart.log")
    wall = time.perf_counter() - t0
    if not stats:  # llama-server: what each response said it evaluated
        evaluated = sum(r.evaluated or 0 for r in records)
    return RunResult(spec.name, pass_index, wall, peak, records, evaluated, stats, args.restart)


def summary(result: RunResult, turns: int) -> dict[str, Any]:
    per_turn = []
    for turn in range(turns):
        recs = [r for r in result.records if r.turn == turn and not r.error]
        ttfts = sorted(r.ttft_s for r in recs if r.ttft_s is not None)
        cached = [r.cached_tokens for r in recs if r.cached_tokens is not None]
        prompts = [r.prompt_tokens for r in recs if r.prompt_tokens is not None]
        per_turn.append(
            {
                "turn": turn,
                "n": len(recs),
                "errors": sum(1 for r in result.records if r.turn == turn and r.error),
                "ttft_s_median": statistics.median(ttfts) if ttfts else None,
                "ttft_s_p90": ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))] if ttfts else None,
                "prompt_tokens_mean": statistics.fmean(prompts) if prompts else None,
                "cached_tokens_mean": statistics.fmean(cached) if cached else None,
            }
        )
    return {
        "server": result.server,
        "pass": result.pass_index,
        "restart": result.restart,
        "wall_s": result.wall_s,
        "peak_rss_bytes": result.peak_rss_bytes,
        "prompt_tokens_evaluated": result.evaluated_total,
        "turns": per_turn,
        "stats": result.stats,
    }


def _later_turn_ttft(row: dict[str, Any]) -> float | None:
    """The median TTFT of a run's later turns (turn 1 on), pooled per turn by median."""
    medians = [t["ttft_s_median"] for t in row["turns"][1:] if t["ttft_s_median"] is not None]
    return statistics.median(medians) if medians else None


def paired(
    runs: list[dict[str, Any]], server: str = "ours", peer: str = "llama-server"
) -> dict[str, Any]:
    """Pass by pass, ``server`` over ``peer`` (later-turn median TTFT, turn 0's, wall time)
    and ``server``'s later turns over its own turn 0: the median of the per-pass ratios and a
    90% bootstrap interval of it (backend/bench/paired.py)."""
    by_pass: dict[int, dict[str, dict[str, Any]]] = {}
    for row in runs:
        by_pass.setdefault(row["pass"], {})[row["server"]] = row
    figures: dict[str, list[float]] = {
        "later_turn_ttft": [],
        "turn0_ttft": [],
        "wall": [],
        "own_later_over_turn0": [],
    }
    for rows in by_pass.values():
        ours, theirs = rows.get(server), rows.get(peer)
        if ours is None:
            continue
        later, first = _later_turn_ttft(ours), ours["turns"][0]["ttft_s_median"]
        if later and first:
            figures["own_later_over_turn0"].append(later / first)
        if theirs is None:
            continue
        their_later, their_first = _later_turn_ttft(theirs), theirs["turns"][0]["ttft_s_median"]
        if later and their_later:
            figures["later_turn_ttft"].append(later / their_later)
        if first and their_first:
            figures["turn0_ttft"].append(first / their_first)
        figures["wall"].append(ours["wall_s"] / theirs["wall_s"])
    out: dict[str, Any] = {"server": server, "peer": peer}
    for name, values in figures.items():
        if values:
            lo, hi = bootstrap_median_interval(values)
            out[name] = {
                "ratios": [round(v, 3) for v in values],
                "median": round(statistics.median(values), 3),
                "interval_90": [round(lo, 3), round(hi, 3)],
            }
    return out


def report(path: Path, peer: str = "llama-server") -> None:
    """Print (and store in the file) the paired ratios of a finished run."""
    record = json.loads(path.read_text())
    record["paired"] = paired(record["runs"], peer=peer)
    path.write_text(json.dumps(record, indent=2, default=str))
    print(json.dumps(record["paired"], indent=2))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", default="ours,ours-nocache,llama-server")
    p.add_argument("--model", default=str(default_model_path()))
    p.add_argument("--llama-server", default=str(DEFAULT_LLAMA_SERVER))
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--ctx", type=int, default=16384)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--system-tokens", type=int, default=1600)
    p.add_argument("--session-tokens", type=int, default=700)
    p.add_argument("--turn-tokens", type=int, default=60)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--restart", action="store_true", help="turn 0, restart, later turns")
    p.add_argument(
        "--dialect",
        choices=("openai", "anthropic"),
        default="openai",
        help="anthropic: Claude Code's shape on /v1/messages, billing-header line included",
    )
    p.add_argument("--start-timeout", type=float, default=300.0)
    p.add_argument("--out", default="benchmarks/results/agent-sessions")
    p.add_argument(
        "--ours-before",
        help="a checkout (git worktree) of QuantDesk to run as server 'ours-before'",
    )
    p.add_argument("--peer", default="llama-server", help="the server 'ours' is paired with")
    p.add_argument("--report", type=Path, help="only print the paired ratios of this result")
    args = p.parse_args()
    if args.report:
        report(args.report, args.peer)
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    knobs = Knobs(Path(args.model), args.threads, args.parallel, args.ctx, 512, 512)
    results: list[dict[str, Any]] = []
    record = {
        # file names only: a result names no path of the machine it ran on
        "scenario": {
            k: Path(v).name if k in ("model", "llama_server") else v
            for k, v in vars(args).items()
            if k not in ("out", "ours_before")
        },
        "cpu_path": paths_record(ours_cpu_path()),
        "host": {"cpus": os.cpu_count(), "ram_bytes": psutil.virtual_memory().total},
        "runs": results,
    }
    name = f"agent-sessions-n{args.sessions}-t{args.turns}{'-restart' if args.restart else ''}"
    name += "-claude" if args.dialect == "anthropic" else ""
    path = out / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for pass_index in range(args.passes):
        for server in args.servers.split(","):  # interleaved: noise hits every server alike
            result = one_run(server_spec(server.strip(), args), knobs, args, pass_index, out)
            row = summary(result, args.turns)
            results.append(row)
            print(json.dumps({k: row[k] for k in ("server", "pass", "wall_s", "turns")}))
            path.write_text(json.dumps(record, indent=2, default=str))  # after every run
    report(path, args.peer)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
