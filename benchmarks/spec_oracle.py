#!/usr/bin/env python3
"""The most that drafting from the context could gain on the ``edit`` scenario, on this
machine and model: an upper bound to set beside what the n-gram speculator measured.

1. The engine (no speculation, greedy, in-process) answers the edit requests of the
   benchmark (the same prompts ``quantdesk bench --scenarios edit`` sends, keys
   ``edit:0``...); the output tokens are kept. Greedy speculation gives the same tokens.
2. An oracle drafter knows those outputs. At output position ``i`` it may draft any run
   ``output[i:i+k]`` that occurs, contiguous, in the prompt plus ``output[:i]``: every copy
   drafter (llama.cpp's ``ngram-simple``, ours, prompt lookup) drafts such a run or worse.
   Every drafted token is accepted, drafting is free and nothing else costs time.
3. A verification of ``k`` drafted tokens decodes ``k + 1`` rows. Its time ``T(k + 1)`` is
   measured here at the position of a real request (the prompt's length already in the
   KV cache, logits on every row, the fastest of ``--runs``), with the server's
   ``-c``/``-np``/``-t``.
4. Dynamic programming picks each step's ``k`` to minimise the time for the whole output:
   ``best(i) = min over k <= L(i) of T(k + 1) + best(i + k + 1)``. The bound is
   ``n * T(1) / best(0)``: tokens/s with the oracle over tokens/s without speculation, for
   one stream (concurrent streams share each decode, so their bound is lower).

  .venv/bin/python -m benchmarks.spec_oracle [--requests 8] [--out benchmarks/results/spec-oracle]

Writes ``spec-oracle.json``: per request the output length, the share of output tokens an
oracle could draft, and the bound; and the cost curve.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MAX_DRAFT = 48  # llama.cpp's --spec-ngram-simple-size-m, the longest draft either server makes


def longest_copy(context: list[int], output: list[int], i: int) -> int:
    """Length of the longest prefix of ``output[i:]`` found contiguous in ``context +
    output[:i]`` (quadratic, fine for a few hundred tokens)."""
    seen = context + output[:i]
    rest = output[i:]
    best = 0
    first = rest[0] if rest else None
    for start, token in enumerate(seen):
        if token != first:
            continue
        n = 0
        while n < len(rest) and start + n < len(seen) and seen[start + n] == rest[n]:
            n += 1
        best = max(best, n)
    return best


def oracle_time(lengths: list[int], cost: dict[int, float], max_draft: int) -> float:
    """Least time to produce ``len(lengths)`` tokens when step ``i`` may verify up to
    ``lengths[i]`` correct drafted tokens (``cost[r]`` is a decode of ``r`` rows)."""
    n = len(lengths)
    best = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        top = min(lengths[i], max_draft, n - i - 1)
        best[i] = min(cost[k + 1] + best[i + k + 1] for k in range(top + 1))
    return best[0]


def simulate(prompt: list[int], output: list[int], points: dict[int, float], policy: str) -> float:
    """Time our n-gram drafter (``LongestMatch``, the server's defaults) takes to produce
    ``output`` when drafting is free and only decodes cost: ``policy`` ``cost`` chooses each
    draft's length as the server does (:func:`choose_lengths` with the acceptance it has
    seen), ``full`` verifies every draft whole (llama.cpp), ``hindsight`` verifies exactly
    the tokens that will be accepted (the best any length policy could do with this
    drafter)."""
    from backend.engine.speculative.draft_policy import (
        Acceptance,
        Candidate,
        DecodeCost,
        choose_lengths,
        first_rate,
    )
    from backend.engine.speculative.ngram_draft import LongestMatch
    from backend.settings.engine_settings import EngineSettings

    defaults = EngineSettings()
    lookup = LongestMatch(defaults.spec_ngram_simple_size_n, defaults.spec_ngram_simple_size_n_min)
    cost = DecodeCost(dict(points))
    own, overall = Acceptance(), dict[str, Acceptance]()
    tokens = list(prompt)
    seconds, i, n = 0.0, 0, len(output)
    while i < n:
        draft, matched = lookup.draft(tokens, min(n - i - 1, MAX_DRAFT))
        accepted_all = 0
        while accepted_all < len(draft) and draft[accepted_all] == output[i + accepted_all]:
            accepted_all += 1
        k = 0
        if draft:
            source = f"ngram-{matched}"
            record = overall.setdefault(source, Acceptance())
            if policy == "full":
                k = len(draft)
            elif policy == "hindsight":
                k = accepted_all
            else:
                p = own.rate(record.rate(first_rate(source)))
                k = choose_lengths([Candidate(len(draft), p)], 0, cost, per_slot=True)[0]
            accepted = min(k, accepted_all)
            if k:
                own.record(k, accepted, 0.9)
                record.record(k, accepted, 0.99)
            else:
                own.fade(0.9)
        else:
            accepted = 0
        seconds += cost.seconds(k + 1)
        tokens += output[i : i + accepted + 1]
        i += accepted + 1
    return seconds


def generate(args: argparse.Namespace) -> list[tuple[list[int], list[int]]]:
    """(prompt tokens, greedy output tokens) for each edit request."""
    from backend.bench.task_prompts import code_file, edit_prompt
    from backend.engine.engine import Engine
    from backend.engine.request_types import ErrorEvent, FinishEvent, SamplingParams, TokenEvent
    from backend.settings.engine_settings import EngineSettings

    engine = Engine(
        EngineSettings(
            ctx_size=args.ctx, parallel=args.parallel, threads=args.threads, spec_type="none"
        )
    )
    engine.start()
    pairs: list[tuple[list[int], list[int]]] = []
    try:
        for n in range(args.requests):
            task = code_file(args.edit_code_tokens, f"edit:{n}")
            messages = [{"role": "user", "content": edit_prompt(task)}]
            prompt = engine.render_chat(messages, add_generation_prompt=True)
            output: list[int] = []
            done = threading.Event()
            failed: list[str] = []

            def sink(
                event: Any,
                output: list[int] = output,
                done: threading.Event = done,
                failed: list[str] = failed,
            ) -> None:
                if isinstance(event, TokenEvent):
                    output.extend(event.token_ids)
                elif isinstance(event, ErrorEvent):
                    failed.append(event.message)
                    done.set()
                elif isinstance(event, FinishEvent):
                    done.set()

            engine.submit(
                prompt,
                max_tokens=args.edit_max_tokens,
                sampling=SamplingParams(temperature=0.0),
                sink=sink,
            )
            if not done.wait(600) or failed:
                raise RuntimeError(f"request {n} failed: {failed or 'timeout'}")
            pairs.append((prompt, output))
            print(f"request {n}: {len(prompt)} prompt tokens, {len(output)} generated", flush=True)
    finally:
        engine.close()
    return pairs


def decode_costs(args: argparse.Namespace, prompt: list[int]) -> dict[int, float]:
    """Seconds per decode of r rows (1..MAX_DRAFT+1) after ``prompt`` sits in sequence 0."""
    import llama_cpp

    from backend.engine.model_runtime import ModelRuntime
    from backend.settings.default_model import default_model_path
    from backend.settings.engine_settings import EngineSettings

    settings = EngineSettings(
        ctx_size=args.ctx,
        parallel=args.parallel,
        threads=args.threads,
        gpu_layers=args.gpu_layers,
    )
    model = Path(args.model) if args.model else default_model_path()
    runtime = ModelRuntime(model, settings, n_seq_max=args.parallel)
    # another model (the GPU kit's synthetic one) times the same rows: ids within its vocab
    prompt = [t % runtime.n_vocab for t in prompt]
    ctx, memory = runtime.ctx, runtime.memory
    rows_max = MAX_DRAFT + 1
    batch = llama_cpp.llama_batch_init(max(rows_max, runtime.n_batch), 0, 1)

    def fill(tokens: list[int], start: int, logits: bool) -> None:
        for j, token in enumerate(tokens):
            batch.token[j] = token
            batch.pos[j] = start + j
            batch.n_seq_id[j] = 1
            batch.seq_id[j][0] = 0
            batch.logits[j] = 1 if logits or j == len(tokens) - 1 else 0
        batch.n_tokens = len(tokens)

    try:
        for start in range(0, len(prompt), runtime.n_batch):
            fill(prompt[start : start + runtime.n_batch], start, logits=False)
            if llama_cpp.llama_decode(ctx, batch) != 0:
                raise RuntimeError("llama_decode failed on the prompt")
        p = len(prompt)
        cost: dict[int, float] = {}
        for rows in [1, *range(1, rows_max + 1)]:  # the first decode warms up
            times = []
            for _ in range(args.runs):
                fill(prompt[:rows], p, logits=True)
                t = time.perf_counter()
                rc = llama_cpp.llama_decode(ctx, batch)
                times.append(time.perf_counter() - t)
                llama_cpp.llama_memory_seq_rm(memory, 0, p, -1)
                if rc != 0:
                    raise RuntimeError(f"llama_decode failed with {rows} rows")
            cost[rows] = min(times)
    finally:
        llama_cpp.llama_batch_free(batch)
        runtime.close()
    return cost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("-c", "--ctx", type=int, default=16384)
    parser.add_argument("-np", "--parallel", type=int, default=4)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5, help="timings per row count (fastest)")
    parser.add_argument("--edit-code-tokens", type=int, default=400)
    parser.add_argument("--edit-max-tokens", type=int, default=480)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/spec-oracle")
    parser.add_argument(
        "--reuse", type=Path, help="tokens and costs of an earlier run (its --keep file)"
    )
    parser.add_argument("--keep", type=Path, help="write tokens and costs here (JSON)")
    parser.add_argument(
        "--row-cost",
        type=float,
        help="instead of the measured costs, T(r) = T(1) * (1 + ROW_COST * (r - 1)): what a "
        "device where verifying a row is nearly free (a GPU, memory-bound) would give",
    )
    parser.add_argument("--name", default="spec-oracle", help="the result file's name")
    parser.add_argument(
        "--measure",
        action="store_true",
        help="with --reuse: measure the decode costs again, here (on --model, -ngl)",
    )
    parser.add_argument("--model", help="GGUF to time decodes on (default: the embedded model)")
    parser.add_argument("-ngl", "--gpu-layers", type=int, default=0)
    args = parser.parse_args(argv)

    from backend.engine.speculative.draft_policy import consistent

    if args.reuse:
        kept = json.loads(args.reuse.read_text())
        pairs = [(p, o) for p, o in kept["pairs"]]
        cost = {int(r): s for r, s in kept["cost"].items()}
        if args.measure:
            cost = decode_costs(args, pairs[0][0])
            consistent(cost)
    else:
        pairs = generate(args)
        cost = decode_costs(args, pairs[0][0])
        consistent(cost)  # more rows never cheaper: one noisy timing must not help the oracle
    if args.keep:
        args.keep.write_text(json.dumps({"pairs": pairs, "cost": cost}))
    if args.row_cost is not None:
        one = cost[1]
        cost = {r: one * (1 + args.row_cost * (r - 1)) for r in cost}
    rows = []
    totals = dict.fromkeys(("plain", "oracle", "cost", "full", "hindsight"), 0.0)
    for n, (prompt, output) in enumerate(pairs):
        lengths = [longest_copy(prompt, output, i) for i in range(len(output))]
        times = {
            "plain": len(output) * cost[1],
            "oracle": oracle_time(lengths, cost, MAX_DRAFT),
            **{p: simulate(prompt, output, cost, p) for p in ("cost", "full", "hindsight")},
        }
        for key, value in times.items():
            totals[key] += value
        copyable = sum(1 for i in range(1, len(output)) if lengths[i - 1] >= 1)
        rows.append(
            {
                "request": f"edit:{n}",
                "prompt_tokens": len(prompt),
                "output_tokens": len(output),
                "copyable_share": copyable / max(1, len(output) - 1),
                "bound": times["plain"] / times["oracle"],
                "ngram_cost_policy": times["plain"] / times["cost"],
                "ngram_full": times["plain"] / times["full"],
                "ngram_hindsight": times["plain"] / times["hindsight"],
            }
        )
        print(
            f"edit:{n}: {len(output)} tokens, {100 * rows[-1]['copyable_share']:.0f}% copyable, "
            + ", ".join(f"{k} {v:.2f}x" for k, v in rows[-1].items() if k.startswith(("b", "n"))),
            flush=True,
        )
    summary = {
        "what": "upper bound on one-stream tokens/s gain of any copy-from-context drafter, edit",
        # paths by their file name only: no folder of this machine in a committed result
        "settings": {k: (v.name if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "decode_ms_by_rows": {r: round(1000 * s, 3) for r, s in cost.items()},
        "requests": rows,
        "bound_median": statistics.median(r["bound"] for r in rows),
        "all_tokens": {
            k: totals["plain"] / totals[k] for k in ("oracle", "cost", "full", "hindsight")
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out.resolve()
    summary["settings"]["out"] = str(out.relative_to(ROOT)) if out.is_relative_to(ROOT) else "."
    (args.out / f"{args.name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    ms = {r: f"{1000 * cost[r]:.2f}" for r in (1, 9, 33)}
    print(f"all tokens: {summary['all_tokens']}; decode ms by rows {ms}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
