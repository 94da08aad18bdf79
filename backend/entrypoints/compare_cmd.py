"""``quantdesk compare --reference REF.gguf CAND.gguf ...``: what a quant costs in quality.

Perplexity, KL divergence (mean, p99, p90, median), PPL ratio, RMS Δp and same-top %
against the reference, with llama-perplexity's definitions; size, bits per weight, load
time and tok/s; greedy answers side by side. Writes JSON, a self-contained HTML report and
a PNG plot; ``--max-kld`` / ``--max-ppl-ratio`` make it exit non-zero for a failing quant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from backend.core.errors import QuantDeskError
from backend.core.units import human_bytes
from backend.entrypoints.job_progress_bar import JobProgressBar
from backend.gguf_file.ggml_types import quant_from_filename
from backend.gguf_file.gguf_header import read_gguf_header
from backend.jobs.job_session import JobSession, add_progress_jsonl_option
from backend.settings.flags import positive_int


def _ctx(text: str) -> int:
    value = positive_int(text)
    if value < 8:
        raise argparse.ArgumentTypeError("--ctx must be at least 8")
    return value


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="compare quants against a reference: PPL, KL divergence, top-token agreement, "
        "speed, answers",
        description="Evaluate candidate GGUFs against a reference GGUF (F16, BF16 or Q8_0) on "
        "the same text, with the definitions of llama-perplexity --kl-divergence.",
    )
    parser.add_argument("--reference", required=True, type=Path, help="reference GGUF")
    parser.add_argument(
        "candidates",
        nargs="+",
        type=Path,
        metavar="CAND.gguf",
        help="candidate GGUFs (same tokenizer as the reference)",
    )
    parser.add_argument(
        "--text",
        type=Path,
        default=None,
        help="evaluation text (UTF-8); default: docstrings of Python's "
        "standard library, read from this interpreter's sources",
    )
    parser.add_argument("--ctx", type=_ctx, default=512, help="tokens per chunk (default 512)")
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=2048,
        help="tokens per decode; batch/ctx chunks are evaluated together (default 2048)",
    )
    parser.add_argument(
        "--chunks",
        type=positive_int,
        default=None,
        help="evaluate at most this many chunks (default: the whole text)",
    )
    parser.add_argument(
        "--prompts",
        type=Path,
        default=None,
        help="prompts to answer, one per line (default: a built-in set)",
    )
    parser.add_argument("--no-answers", action="store_true", help="skip the greedy answers")
    parser.add_argument("--no-speed", action="store_true", help="skip the tok/s measurement")
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="CPU threads (default: all cores this process may use)",
    )
    parser.add_argument(
        "--n-gpu-layers",
        type=int,
        default=0,
        help="layers to offload to a GPU build of llama.cpp (default 0)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write results as JSON")
    parser.add_argument("--report", type=Path, default=None, help="write an HTML report")
    parser.add_argument(
        "--plot", type=Path, default=None, help="write a PNG of KLD and PPL ratio against size"
    )
    parser.add_argument(
        "--keep-base",
        type=Path,
        default=None,
        help="keep the reference log-probabilities here (llama.cpp --kl-divergence-base format)",
    )
    parser.add_argument(
        "--max-kld",
        type=float,
        default=None,
        help="fail (exit 5) when a candidate's mean KLD exceeds this",
    )
    parser.add_argument(
        "--max-ppl-ratio",
        type=float,
        default=None,
        help="fail (exit 5) when a candidate's PPL ratio exceeds this",
    )
    add_progress_jsonl_option(parser)
    parser.set_defaults(handler=run)


def _num(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _table(data: dict[str, Any]) -> str:
    ref = data["reference"]
    width = max(len("candidate"), *(len(c["name"]) for c in data["candidates"])) + 2
    lines = [
        f"reference {ref['name']}: PPL {_num(ref['ppl'], '.4f')}, "
        f"{human_bytes(ref['size_bytes'])}, {_num(ref['bpw'], '.2f')} bpw",
        f"{'candidate':<{width}}{'size':>10}{'bpw':>7}{'PPL':>10}{'ratio':>8}{'KLD':>10}"
        f"{'KLD p99':>9}{'RMS dp%':>9}{'top%':>8}{'gen t/s':>9}",
    ]
    for c in data["candidates"]:
        lines.append(
            f"{c['name']:<{width}}{human_bytes(c['size_bytes']):>10}{_num(c['bpw'], '>7.2f')}"
            f"{_num(c['ppl'], '>10.4f')}{_num(c['ppl_ratio'], '>8.4f')}"
            f"{_num(c['kld_mean'], '>10.5f')}{_num(c['kld_p99'], '>9.4f')}"
            f"{_num(c['rms_dp_pct'], '>9.2f')}{_num(c['same_top_pct'], '>8.2f')}"
            f"{_num(c['gen_tok_s'], '>9.1f')}"
        )
    return "\n".join(lines) + "\n"


# References fit to measure other quants against: full precision or nearly lossless.
GOOD_REFERENCES = frozenset({"F32", "F16", "BF16", "Q8_0"})


def reference_warning(path: Path) -> str | None:
    """A warning when the reference is itself a low-bit quant (or can't be told)."""
    try:
        header = read_gguf_header(path)
    except (OSError, QuantDeskError):
        return None  # the run itself reports an unreadable reference
    kind = header.file_type_name or quant_from_filename(path.name)
    if kind is None or kind.upper() in GOOD_REFERENCES:
        return None
    return (
        f"warning: the reference {path.name} is itself a {kind} quant: KLD and PPL ratio then "
        "measure the distance from it, not from the original weights (use F16, BF16 or Q8_0)"
    )


def run(args: argparse.Namespace) -> int:
    # Imported here so that `quantdesk --help` does not load llama.cpp or matplotlib.
    from backend.compare.compare import CompareConfig, run_compare
    from backend.compare.errors import GateFailedError
    from backend.compare.gate import gate_failures
    from backend.compare.plot import plot_png
    from backend.compare.report_html import render_html
    from backend.compare.results import write_atomic, write_json

    bar = None if args.progress_jsonl else JobProgressBar()
    config = CompareConfig(
        reference=args.reference,
        candidates=list(args.candidates),
        text_path=args.text,
        n_ctx=args.ctx,
        n_batch=max(args.batch, args.ctx),
        max_chunks=args.chunks,
        prompts_path=args.prompts,
        answers=not args.no_answers,
        speed=not args.no_speed,
        threads=args.threads,
        n_gpu_layers=args.n_gpu_layers,
        keep_base=args.keep_base,
    )
    with JobSession(jsonl=args.progress_jsonl) as session:
        if warning := reference_warning(args.reference):
            session.warning(warning)
        try:
            result = run_compare(config, session.progress if bar is None else bar, session.cancel)
        finally:
            if bar is not None:
                bar.close()
        failures = gate_failures(result, args.max_kld, args.max_ppl_ratio)
        failing = {line.split(":", 1)[0] for line in failures}
        png = plot_png(result) if (args.plot or args.report) else None
        outputs: dict[str, str] = {}
        if args.json:
            outputs["json"] = str(write_json(result, args.json))
        if args.plot and png is not None:
            outputs["plot"] = str(write_atomic(args.plot, png))
        if args.report:
            html = render_html(result, png, failing)
            outputs["report"] = str(write_atomic(args.report, html.encode("utf-8")))
        data = result.to_json()
        session.result({**data, "outputs": outputs, "gate_failures": failures})
        if not args.progress_jsonl:
            sys.stdout.write(_table(data))
        if failures:
            raise GateFailedError("gate failed: " + "; ".join(failures))
    return 0
