"""What the router's hop costs: CPU time of the router process per streamed token.

On a machine with few cores every millisecond the router spends relaying is taken from
llama.cpp's threads, so the figure that matters is CPU time, which a noisy machine disturbs
far less than tokens/s. ``quantdesk serve`` without ``-m`` serves a library folder holding
only the model; after one untimed request, ``--requests`` streamed requests of
``--max-tokens`` (``ignore_eos``) run one at a time, and the router process's own CPU time
(user + system, its children not counted) is divided by the content chunks received. The
router's idle CPU over ``--idle-s`` seconds is measured too (its timers and log follower),
and subtracted pro rata for the "relay" figure.

With ``--before TREE`` (a ``git worktree`` of an earlier commit) both trees run, alternating,
``--passes`` times each.

    .venv/bin/python -m benchmarks.router_hop_cpu --before /tmp/before --passes 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from backend.settings.default_model import default_model_path
from backend.system.cpu_name import cpu_model
from benchmarks.peer_servers import ROOT, VENV_BIN, free_port


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _stream(url: str, model: str, max_tokens: int) -> int:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a long story about a lighthouse."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }
    chunks = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith("data:") and '"content"' in line:
                chunks += 1
    return chunks


def one_pass(tree: Path, args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="router-hop-"))
    library = work / "library"
    library.mkdir()
    model = Path(args.model)
    (library / model.name).symlink_to(model.resolve())
    port = free_port()
    argv = [str(VENV_BIN / "python"), "-m", "backend.entrypoints.main", "serve"]
    argv += ["--models-dir", str(library), "--port", str(port), "-np", "4", "-t", str(args.threads)]
    env = dict(os.environ, QUANTDESK_HOME=str(work / "home"))
    with (work / "serve.log").open("wb") as log:
        proc = subprocess.Popen(argv, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the router in {tree} did not start; see {work / 'serve.log'}")
            time.sleep(0.3)
        name = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
        _stream(url, name, 8)  # loads the model: not counted
        router = psutil.Process(proc.pid)
        before = _cpu_s(router)
        time.sleep(args.idle_s)
        idle_per_s = (_cpu_s(router) - before) / args.idle_s
        before, t0 = _cpu_s(router), time.perf_counter()
        chunks = sum(_stream(url, name, args.max_tokens) for _ in range(args.requests))
        busy_s, wall_s = _cpu_s(router) - before, time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    per_chunk = busy_s / chunks
    return {
        "chunks": chunks,
        "wall_s": round(wall_s, 2),
        "tokens_per_s": round(chunks / wall_s, 1),
        "router_cpu_us_per_chunk": round(1e6 * per_chunk, 1),
        "idle_cpu_ms_per_s": round(1e3 * idle_per_s, 2),
        "relay_cpu_us_per_chunk": round(1e6 * (busy_s - idle_per_s * wall_s) / chunks, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", type=Path, help="also run this checkout, alternating")
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--idle-s", type=float, default=10.0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default=str(default_model_path()))
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/router-hop"))
    args = p.parse_args()
    trees = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for i in range(args.passes):
        order = list(trees.items()) if i % 2 == 0 else list(reversed(trees.items()))
        for name, tree in order:
            result = one_pass(tree, args)
            runs[name].append(result)
            print(json.dumps({"pass": i, "tree": name} | result), flush=True)
    summary = {
        name: {
            key: statistics.median(r[key] for r in results)
            for key in ("router_cpu_us_per_chunk", "relay_cpu_us_per_chunk", "tokens_per_s")
        }
        for name, results in runs.items()
    }
    record = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("before", "out", "model")},
        "model": Path(args.model).name,
        "cpu": cpu_model(),
        "runs": runs,
        "medians": summary,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"router-hop-cpu-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(record, indent=2))
    print(json.dumps(summary, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
