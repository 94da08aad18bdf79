"""GGUF -> GGUF quantisation with ``llama_model_quantize``, in a child process.

The worker (:mod:`quantize.quantize_worker`) reports each tensor and each shape fallback
as a JSON line; cancel terminates it. The output is written to ``<name>.gguf.part`` and
renamed when complete, then a sidecar ``<name>.gguf.json`` records how it was made.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import GGUF_MAGIC, GGUFHeader, read_gguf_header
from backend.jobs.progress import Progress, ProgressCallback, no_progress
from quantize.child_process import run_child
from quantize.errors import (
    NotGGUFError,
    OutputWriteError,
    QuantizationFailedError,
    QuantizeError,
    RequantizeNotAllowedError,
    SourceNotFoundError,
)
from quantize.output_files import (
    base_model_name,
    default_output_dir,
    final_path,
    free_space,
    part_path,
    sidecar_path,
    write_error,
    write_json_atomic,
    writing,
)
from quantize.quant_types import QuantType, quant_type
from quantize.quantize_worker import PARENT_PID_ENV
from quantize.results import Fallback, QuantizeResult

log = logging.getLogger(__name__)

FLOAT_TENSOR_TYPES = frozenset({"F32", "F16", "BF16"})
WORKER_MODULE = "quantize.quantize_worker"


def read_source_header(source: Path) -> GGUFHeader:
    """Check that ``source`` exists and is a GGUF file; return its header."""
    if not source.exists():
        raise SourceNotFoundError(f"model file not found: {source}")
    if source.is_dir():
        raise NotGGUFError(f"{source} is a folder, not a GGUF file")
    with source.open("rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise NotGGUFError(
            f"{source.name} is not a GGUF file (it starts with {magic!r}, not b'GGUF')"
        )
    try:
        return read_gguf_header(source)
    except GGUFFormatError as exc:
        raise NotGGUFError(f"{source.name} is not a valid GGUF file: {exc}") from exc


def quantized_tensor_types(header: GGUFHeader) -> set[str]:
    """The non-float types of the 2-D weights in the file (empty for an F16/F32 model)."""
    return {
        t.type.name
        for t in header.tensors
        if len(t.shape) >= 2 and t.type.name not in FLOAT_TENSOR_TYPES
    }


# With less free space than this, a stream write that failed without a readable errno
# is taken for a full disk.
NEARLY_FULL_BYTES = 16 << 20


def _failure(qt: QuantType, output: Path, detail: str, err: Any) -> QuantizeError:
    """The error for a failed worker: one plain line for a write that failed (full disk,
    size limit, failing disk), else llama.cpp's own message."""
    if "read error" not in detail:  # llama.cpp failing to read the source says so
        mapped = write_error(output, err if isinstance(err, int) else None)
        if mapped is None and "iostream error" in detail:  # C++ stream failure, errno lost
            try:
                full = shutil.disk_usage(output.parent).free < NEARLY_FULL_BYTES
            except OSError:
                full = False
            mapped = (
                write_error(output, errno.ENOSPC)
                if full
                else OutputWriteError(
                    f"writing {output} failed ({detail}; free: {free_space(output.parent)})"
                )
            )
        if mapped is not None:
            return mapped
    return QuantizationFailedError(f"quantising to {qt.name} failed: {detail}")


def llama_cpp_version() -> str:
    try:
        from importlib.metadata import version

        return f"llama-cpp-python {version('llama_cpp_python')}"
    except Exception:
        return "unknown"


def quantize_gguf(
    source: str | Path,
    qtype: str | QuantType,
    out_dir: str | Path | None = None,
    *,
    imatrix: str | Path | None = None,
    threads: int | None = None,
    allow_requantize: bool = False,
    model_name: str | None = None,
    progress: ProgressCallback = no_progress,
    cancel: threading.Event | None = None,
) -> QuantizeResult:
    """Quantise the GGUF ``source`` to ``<out_dir>/<model-name>-<TYPE>.gguf``."""
    qt = qtype if isinstance(qtype, QuantType) else quant_type(qtype)
    source = Path(source).expanduser().resolve()
    header = read_source_header(source)
    imatrix_path = Path(imatrix).expanduser().resolve() if imatrix is not None else None
    if imatrix_path is not None and not imatrix_path.is_file():
        from quantize.errors import ImatrixError

        raise ImatrixError(f"imatrix file not found: {imatrix_path}")
    warnings: list[str] = []
    already = quantized_tensor_types(header)
    if already:
        kinds = ", ".join(sorted(already))
        if not allow_requantize:
            raise RequantizeNotAllowedError(
                f"{source.name} is already quantised ({kinds}); requantising loses quality. "
                "Start from an F16/BF16/F32 GGUF, or pass --allow-requantize"
            )
        msg = (
            f"requantising {source.name}, which is already quantised ({kinds}): the result "
            "is worse than quantising the original F16/BF16 weights"
        )
        log.warning(msg)
        warnings.append(msg)
    out_dir = Path(out_dir).expanduser() if out_dir is not None else default_output_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    name = model_name or base_model_name(source.name)
    target = final_path(out_dir, name, qt.name)
    if target.resolve() == source:
        raise QuantizeError(f"the output {target} would overwrite the source")
    tmp = part_path(target)
    job = {
        "source": str(source),
        "output": str(tmp),
        "ftype": qt.ftype,
        "threads": threads or 0,
        "allow_requantize": allow_requantize,
        "imatrix": str(imatrix_path) if imatrix_path else None,
    }
    fallbacks: list[Fallback] = []
    outcome: dict[str, Any] = {}
    errors: list[str] = []
    n_tensors = len(header.tensors)

    def on_line(line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            log.debug("quantize worker: %s", line)
            return
        if not isinstance(event, dict):
            return
        kind = event.get("event")
        if kind == "tensor":
            progress(
                Progress(
                    "quantize",
                    int(event["index"]),
                    int(event["total"]),
                    f"{event['name']}: {event['from_type']} -> {event['to_type']}",
                )
            )
        elif kind == "fallback":
            fallbacks.append(
                Fallback(
                    tensor=str(event["name"]),
                    ncols=int(event["ncols"]),
                    wanted=event["wanted"],
                    used=event["used"],
                )
            )
        elif kind in ("done", "error"):
            outcome.update(event)
        elif kind == "log":
            text = str(event.get("line", ""))
            log.debug("llama.cpp: %s", text)
            if "failed to quantize" in text or "error" in text.lower():
                errors.append(text.strip())

    started = time.monotonic()
    progress(Progress("quantize", 0, n_tensors, f"{source.name} -> {target.name}"))
    with writing(tmp):
        try:
            env = {**os.environ, PARENT_PID_ENV: str(os.getpid())}
            result = run_child(
                [sys.executable, "-m", WORKER_MODULE, json.dumps(job)],
                on_line,
                cancel,
                what="quantisation",
                env=env,
            )
            if outcome.get("event") == "error":
                raise _failure(qt, tmp, str(outcome["message"]), outcome.get("errno"))
            if result.returncode != 0 or outcome.get("rc", 1) != 0:
                detail = errors[-1] if errors else f"exit code {result.returncode}"
                raise _failure(qt, tmp, detail, outcome.get("errno"))
            if not tmp.is_file():
                raise QuantizationFailedError(f"llama.cpp wrote no file for {target.name}")
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    if fallbacks:
        log.info(
            "%d tensors fell back to another type: %s",
            len(fallbacks),
            ", ".join(f"{f.tensor} ({f.wanted}->{f.used})" for f in fallbacks[:5]),
        )
    res = QuantizeResult(
        path=target,
        sidecar=sidecar_path(target),
        source=source,
        type=qt.name,
        size_bytes=target.stat().st_size,
        seconds=seconds,
        n_tensors=n_tensors,
        imatrix=imatrix_path,
        fallbacks=fallbacks,
        warnings=warnings,
    )
    write_json_atomic(
        res.sidecar,
        {
            "source": str(source),
            "type": qt.name,
            "imatrix": str(imatrix_path) if imatrix_path else None,
            "llama_cpp_version": llama_cpp_version(),
            "size_bytes": res.size_bytes,
            "seconds": round(seconds, 3),
            "threads": threads or 0,
            "allow_requantize": allow_requantize,
            "fallbacks": [f.model_dump() for f in fallbacks],
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    )
    log.info("wrote %s (%.1f MiB) in %.1f s", target, res.size_bytes / 2**20, seconds)
    return res
