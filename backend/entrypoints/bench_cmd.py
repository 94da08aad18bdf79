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
    BenchError,
    BenchProgress,
    format_table,
    run_benchmark,
    write_plot,
    write_results_json,
)
from backend.bench.scenario_names import ALL, DEFAULT, EXTRA, PLAIN, SHARED_PREFIX, parse_scenarios
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


def _scenarios(text: str) -> tuple[str, ...]:
    try:
        return parse_scenarios(text)
    except BenchError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _default(name: str) -> Any:
    return BenchConfig.__dataclass_fields__[name].default


def add_scenario_options(parser: argparse.ArgumentParser) -> None:
    """``--scenarios`` and the knobs of the follow-up, edit and story scenarios (shared with
    ``benchmarks/peer_compare.py``)."""
    parser.add_argument(
        "--scenarios",
        type=_scenarios,
        default=DEFAULT,
        metavar="LIST",
        help=f"comma-separated, from {','.join(ALL)} or 'all' (default "
        f"{','.join(DEFAULT)}; 'prefix' = shared-prefix). follow-up: each client holds one "
        "chat conversation of --turns turns, each resending the answers it got plus "
        "--turn-tokens new user tokens, TTFT reported per turn (always /v1/chat/completions). "
        "edit: a --edit-code-tokens Python file comes back with one method renamed; greedy, "
        "no ignore_eos (the model ends the answer), output capped at --edit-max-tokens. "
        "story: a short prompt, --story-max-tokens of output. --no-plain and "
        "--shared-prefix-tokens 0 still drop those two",
    )
    for flag, name, text in (
        ("--turns", "turns", "follow-up: turns per conversation"),
        ("--turn-tokens", "turn_tokens", "follow-up: new user tokens per turn"),
        ("--edit-code-tokens", "edit_code_tokens", "edit: size of the code file"),
        ("--edit-max-tokens", "edit_max_tokens", "edit: output cap"),
        ("--story-max-tokens", "story_max_tokens", "story: fixed output length"),
    ):
        default = _default(name)
        parser.add_argument(flag, type=positive_int, default=default, help=f"{text} ({default})")


def scenario_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`BenchConfig` fields chosen by :func:`add_scenario_options` (and the
    older ``--no-plain``/``--shared-prefix-tokens``)."""
    names: tuple[str, ...] = args.scenarios
    return {
        "include_plain": PLAIN in names and not args.no_plain,
        "shared_prefix_tokens": args.shared_prefix_tokens if SHARED_PREFIX in names else 0,
        "extra_scenarios": tuple(n for n in names if n in EXTRA),
        "turns": args.turns,
        "turn_tokens": args.turn_tokens,
        "edit_code_tokens": args.edit_code_tokens,
        "edit_max_tokens": args.edit_max_tokens,
        "story_max_tokens": args.story_max_tokens,
    }


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="benchmark an OpenAI-compatible server (tokens/s, TTFT, inter-token latency)",
        description="Stream fixed-length requests at several concurrency levels, with and "
        "without a shared system prompt (and, with --scenarios, multi-turn chat follow-ups, "
        "a code edit and a story); write medians as JSON and a PNG plot.",
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
    add_scenario_options(parser)
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
        fresh_prefix_per_repetition=not args.warm_prefix,
        warmup=not args.no_warmup,
        ignore_eos=not args.no_ignore_eos,
        **scenario_fields(args),
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
