"""``quantdesk bench URL``: load-test any OpenAI-compatible server, write JSON + PNG."""

from __future__ import annotations

import argparse
import logging
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.bench import (
    BenchConfig,
    BenchProgress,
    format_table,
    run_benchmark,
    write_plot,
    write_results_json,
)
from backend.jobs.job_session import JobSession, add_progress_jsonl_option
from backend.jobs.progress import Progress
from backend.settings.flags import positive_int


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(positive_int(part) for part in text.split(",") if part.strip())
    except argparse.ArgumentTypeError:
        levels = ()
    if not levels:
        raise argparse.ArgumentTypeError(f"expected levels >= 1 like 1,4,8,16, got {text!r}")
    return levels


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark an OpenAI-compatible server (tokens/s, TTFT, inter-token latency)",
        description="Stream fixed-length requests at several concurrency levels, with and "
        "without a shared system prompt; write medians as JSON and a PNG plot.",
    )
    parser.add_argument("url", help="server root, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--concurrency",
        type=_levels,
        default=(1, 4, 8, 16),
        help="comma-separated concurrency levels (default 1,4,8,16)",
    )
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions per level")
    parser.add_argument(
        "--requests-per-client",
        type=int,
        default=2,
        help="requests each concurrent client sends per repetition",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=64,
        help="distinct prompt length per request (approximate tokens)",
    )
    parser.add_argument("--max-tokens", type=int, default=64, help="fixed output length")
    parser.add_argument(
        "--shared-prefix-tokens",
        type=int,
        default=1000,
        help="shared system prompt length for the prefix scenario (0: skip it)",
    )
    parser.add_argument(
        "--no-plain", action="store_true", help="skip the scenario without a shared prefix"
    )
    parser.add_argument(
        "--warm-prefix",
        action="store_true",
        help="keep one shared prefix for all repetitions (default: a fresh one "
        "per repetition, so each starts uncached)",
    )
    parser.add_argument(
        "--endpoint",
        choices=["completions", "chat"],
        default="completions",
        help="which API to load: /v1/completions or /v1/chat/completions (default completions)",
    )
    parser.add_argument(
        "--no-ignore-eos",
        action="store_true",
        help="don't send ignore_eos (servers that reject it); early stops are reported",
    )
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up wave")
    parser.add_argument("--api-key", default=None, help="Bearer token")
    parser.add_argument("--model", default=None, help="model id (default: first of /v1/models)")
    parser.add_argument("--label", default="server", help="name of this server in the outputs")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("bench-results"),
        help="output folder (default ./bench-results)",
    )
    add_progress_jsonl_option(parser)
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(
        url=args.url,
        label=args.label,
        endpoint=args.endpoint,
        model=args.model,
        api_key=args.api_key,
        concurrency=tuple(args.concurrency),
        repetitions=args.reps,
        requests_per_client=args.requests_per_client,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        shared_prefix_tokens=args.shared_prefix_tokens,
        include_plain=not args.no_plain,
        fresh_prefix_per_repetition=not args.warm_prefix,
        warmup=not args.no_warmup,
        ignore_eos=not args.no_ignore_eos,
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    with JobSession(jsonl=args.progress_jsonl) as session:

        def on_progress(p: BenchProgress) -> None:
            session.progress(Progress(p.stage, p.done, p.total, p.message))

        result = run_benchmark(config, progress=on_progress, cancel=session.cancel)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        stem = f"bench-{re.sub(r'[^A-Za-z0-9_.-]+', '_', config.label)}-{stamp}"
        json_path = write_results_json([result], args.out / f"{stem}.json")
        title = f"{config.label}: {config.url}"
        png_path = write_plot([result], args.out / f"{stem}.png", title=title)
        session.result({"json": str(json_path), "png": str(png_path), "result": result.to_dict()})
    if not args.progress_jsonl:
        sys.stdout.write(format_table([result]) + "\n")
        for note in result.notes:
            sys.stdout.write(f"note: {note}\n")
        sys.stdout.write(f"wrote {json_path}\nwrote {png_path}\n")
    return 0
