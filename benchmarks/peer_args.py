"""peer_compare's command line, and the servers it names."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from backend.entrypoints.bench_cmd import add_scenario_options
from benchmarks.peer_ratios import BASELINE
from benchmarks.peer_servers import (
    DEFAULT_LLAMA_SERVER,
    ServerSpec,
    eog_logit_bias,
    llama_cpp_python_argv,
    llama_server_argv,
    ours_argv,
    ours_in,
    ours_library_argv,
)

SERVERS = (
    "ours",
    "ours-b",
    "ours-before",
    "ours-router",
    "ours-router-before",
    "llama-server",
    "llama-cpp-python",
)
SERVER_HELP = """servers, comma-separated (default ours,llama-server,llama-cpp-python):
  ours              this checkout's quantdesk serve
  ours-b            the same server a second time, with --ours-b-flags: e.g. ours with
                    speculation against ours without it in one run (paired ratios of
                    ours over ours-b are in the JSON and printed)
  ours-before       another checkout (--ours-before TREE)
  ours-router       this checkout's default path: quantdesk serve without -m (the router
                    and a child server per model), a library folder holding the model
  ours-router-before  the same from --ours-before TREE
  llama-server      llama.cpp's server (--llama-server)
  llama-cpp-python  python -m llama_cpp.server"""


def parse_args(argv: list[str] | None = None, doc: str | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="default", help="GGUF path or 'default' (SmolLM2)")
    p.add_argument("--servers", default="ours,llama-server,llama-cpp-python", help=SERVER_HELP)
    p.add_argument("--llama-server", type=Path, default=DEFAULT_LLAMA_SERVER)
    p.add_argument(
        "--ours-before",
        type=Path,
        default=None,
        metavar="TREE",
        help="also run QuantDesk from this checkout as server 'ours-before' (add it to "
        "--servers), to measure a change before and after in one interleaved run",
    )
    for name in SERVERS:
        p.add_argument(
            f"--{name}-flags",
            default="",
            metavar="FLAGS",
            help=f"extra command-line flags for {name} (shell-split, recorded in the JSON)"
            + (
                ', e.g. --ours-flags "--spec-type ngram-simple --spec-draft-n-max 16";\n'
                'a single flag needs "=": --ours-flags=--kv-unified'
                if name == "ours"
                else ""
            ),
        )
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-np", "--parallel", type=int, default=16)
    p.add_argument(
        "-c",
        "--ctx-size",
        type=int,
        default=0,
        help="total KV cells (default: parallel x (the longest request of the chosen "
        "scenarios + 128))",
    )
    p.add_argument("-b", "--batch-size", type=int, default=512)
    p.add_argument("-ub", "--ubatch-size", type=int, default=512)
    p.add_argument(
        "--kv-unified",
        action="store_true",
        help="one KV cache for all slots on both servers (default: a stream per "
        "slot, which is llama-server's layout with an explicit -np)",
    )
    p.add_argument("--concurrency", default="1,4,8,16")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions per round")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="servers take turns this many times; repetitions of all rounds are "
        "pooled (fairer on a machine whose load changes)",
    )
    p.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="PASSES",
        help="load all servers at once and alternate them repetition by "
        "repetition, PASSES times (replaces --reps/--rounds; steadier ratios on a "
        "busy machine)",
    )
    p.add_argument("--requests-per-client", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument(
        "--shared-prefix-tokens",
        type=int,
        default=1000,
        help="shared system prompt of the prefix scenario (0: skip that scenario)",
    )
    p.add_argument("--no-plain", action="store_true", help="skip the scenario without prefix")
    p.add_argument(
        "--warm-prefix",
        action="store_true",
        help="one shared prefix for the whole run instead of a fresh one per repetition",
    )
    add_scenario_options(p)
    p.add_argument("--startup-timeout", type=float, default=300)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default bench-results/peer-<UTC time>)",
    )
    return p.parse_args(argv)


def server_specs(args: argparse.Namespace, model: Path) -> dict[str, ServerSpec]:
    """Every server ``--servers`` may name, with its ``--<name>-flags``."""
    lcp_body = {"logit_bias": eog_logit_bias(model)} if "llama-cpp-python" in args.servers else {}
    specs = {
        "ours": ServerSpec("ours", ours_argv),
        "ours-b": ServerSpec("ours-b", ours_argv, note="ours again, with --ours-b-flags"),
        "ours-router": ServerSpec("ours-router", ours_library_argv, note="serve without -m"),
        BASELINE: ServerSpec(BASELINE, llama_server_argv(args.llama_server)),
        "llama-cpp-python": ServerSpec(
            "llama-cpp-python",
            llama_cpp_python_argv,
            health_path="/v1/models",
            note="serves one request at a time (interrupt_requests=False so streams finish); "
            "ignores ignore_eos, so end-of-generation tokens get logit_bias -100",
            bench_overrides={"extra_body": lcp_body},
        ),
    }
    if args.ours_before:
        tree = args.ours_before.resolve()
        specs["ours-before"] = ServerSpec("ours-before", ours_in(tree), cwd=tree)
        specs["ours-router-before"] = ServerSpec("ours-router-before", ours_library_argv, cwd=tree)
    for name, spec in specs.items():
        spec.extra_flags = shlex.split(getattr(args, f"{name.replace('-', '_')}_flags"))
    return specs
