"""Step: what n-gram speculation gives the ``edit`` scenario where a verified row is cheap
(issue 17: its 1.5x goal was out of reach on the 2-core CPU, where each extra row costs
about 0.45 of a decode). Decodes of 1 to 49 rows are timed on the synthetic model with
every layer offloaded, then SmolLM2's greedy edit answers (committed,
``benchmarks/results/spec-oracle/edit-tokens.json``) are replayed under that cost curve:
the oracle bound, our drafter with the server's length policy, with hindsight lengths and
with whole drafts (llama.cpp's way).

    python -m benchmarks.gpu.step_spec --model synth-Q4_K_M.gguf --threads T [--gpu]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks import spec_oracle
from benchmarks.gpu.kit_env import KitPaths
from benchmarks.gpu.step_common import run_step

TOKENS = spec_oracle.ROOT / "benchmarks" / "results" / "spec-oracle" / "edit-tokens.json"


def main() -> dict[str, Any]:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--gpu", action="store_true")
    args = p.parse_args()
    paths = KitPaths.from_env()
    name = "spec-edit-costs"
    argv = ["--reuse", str(TOKENS), "--measure", "--model", str(paths.models / args.model)]
    argv += ["-ngl", "99" if args.gpu else "0", "-c", "4096", "-np", "1"]
    argv += ["-t", str(args.threads), "--runs", "3", "--out", str(paths.out), "--name", name]
    spec_oracle.main(argv)
    data = json.loads((paths.out / f"{name}.json").read_text(encoding="utf-8"))
    ms = data["decode_ms_by_rows"]
    return {
        "ok": True,
        "gain_over_no_speculation": {k: round(v, 3) for k, v in data["all_tokens"].items()},
        "decode_ms_by_rows": {r: ms[r] for r in ("1", "9", "33", "49") if r in ms},
        "file": f"{name}.json",
    }


if __name__ == "__main__":
    raise SystemExit(run_step(main))
