"""Why a unified KV cache decodes slower for one stream: finished prefixes widen attention.

Three engines are loaded in-process at once, with ``-c 16384 -np 8 -t 2``: unified with
8 prefix-cache entries (the old default), unified with none, and a KV stream per slot
(the default now). They take turns on the same 12 requests, one at a time (about 300
prompt tokens each, distinct, 128 greedy tokens with ``ignore_eos``), the order
alternating per request. Each request leaves its prefix cached, so the cache fills up.
Reported: each request's generation tokens/s per engine, and the ratio against the
per-slot engine once the cache holds 8 prefixes (requests 8 to 12).

llama.cpp's unified cache attends over every cell up to the highest one in use and masks
the other sequences' cells out, so the cached prefixes make each decode wider. With a
stream per slot a row attends to its own stream only, and idle slots cost nothing.

  .venv/bin/python -m benchmarks.kv_layout_cause [--requests 12] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
from pathlib import Path

from backend.engine.engine import Engine
from backend.engine.request_types import EngineEvent, FinishEvent, SamplingParams
from backend.settings.engine_settings import EngineSettings

ROOT = Path(__file__).resolve().parents[1]
LAYOUTS: dict[str, dict[str, object]] = {
    "unified-cache8": {"kv_unified": True, "prefix_cache_entries": 8},
    "unified-cache0": {"kv_unified": True, "prefix_cache_entries": 0},
    "per-slot": {"kv_unified": False},
}
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
]


def generation_rate(engine: Engine, text: str) -> float:
    done = threading.Event()
    rate: list[float] = []

    def sink(event: EngineEvent) -> None:
        if isinstance(event, FinishEvent):
            rate.append(event.gen_tokens_per_s or 0.0)
            done.set()

    greedy = SamplingParams(temperature=0.0, ignore_eos=True)
    engine.submit(engine.tokenize(text), max_tokens=128, sampling=greedy, sink=sink)
    if not done.wait(300):
        raise TimeoutError("no answer in 300 s")
    return rate[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/kv-layout"))
    args = parser.parse_args()
    engines = {}
    for name, knobs in LAYOUTS.items():
        settings = {"ctx_size": 16384, "parallel": 8, "threads": 2, **knobs}
        engine = Engine(EngineSettings.model_validate(settings))
        engine.start()
        engines[name] = engine
    rates: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    cells: dict[str, list[int]] = {name: [] for name in LAYOUTS}
    try:
        for i in range(args.requests):
            body = " ".join(f"{WORDS[(i * 7 + j) % len(WORDS)]}{j * (i + 3)}" for j in range(120))
            text = f"Request {i}. {body}\nSummarise."
            order = list(LAYOUTS) if i % 2 == 0 else list(reversed(LAYOUTS))
            for name in order:
                rates[name].append(generation_rate(engines[name], text))
                cells[name].append(engines[name].scheduler.kv.used)
            print(i + 1, {name: round(r[-1], 1) for name, r in rates.items()}, flush=True)
    finally:
        for engine in engines.values():
            engine.close()
    full = slice(8, None)  # the cache holds 8 prefixes from the 9th request on
    ratios = {
        name: [a / b for a, b in zip(rates[name][full], rates["per-slot"][full], strict=True)]
        for name in LAYOUTS
    }
    report = {
        "settings": {"ctx_size": 16384, "parallel": 8, "threads": 2, "max_tokens": 128},
        "gen_tokens_per_s": rates,
        "kv_cells_used_after": cells,
        "ratio_vs_per_slot_with_full_cache": {n: statistics.median(r) for n, r in ratios.items()},
        "ratios_with_full_cache": ratios,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "kv-layout-cause.json").write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    print(json.dumps(report["ratio_vs_per_slot_with_full_cache"], indent=1))


if __name__ == "__main__":
    main()
