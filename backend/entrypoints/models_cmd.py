"""``quantdesk models``: search the Hub, pull files, list and remove library models, fit check."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, get_args

from backend.core.units import human_bytes
from backend.entrypoints.progress_bar import TerminalProgressBar
from backend.fit.fit_estimate import FitEstimate, estimate_fit
from backend.fit.memory_probe import probe_memory
from backend.gguf_file.gguf_header import read_gguf_header
from backend.gguf_file.projector_file import projector_path
from backend.hub.download_manager import DownloadManager
from backend.hub.download_progress import DownloadProgress
from backend.hub.hub_search import (
    ModelKind,
    RepoListing,
    SortKey,
    list_repo_files,
    remote_gguf_header,
    search_models,
)
from backend.hub.hub_settings import HubSettings
from backend.hub.library import ModelLibrary
from backend.jobs.events import ProgressEvent
from backend.jobs.job_session import JobSession, add_progress_jsonl_option
from backend.settings.engine_settings import EngineSettings, ServingKnobs, SpeculativeKnobs
from backend.settings.flags import add_settings_flags, positive_int, settings_from_args
from backend.settings.media_settings import MediaKnobs


def _settings(args: argparse.Namespace) -> HubSettings:
    models_dir = getattr(args, "models_dir", None)
    return HubSettings.model_validate({"models_dir": Path(models_dir)} if models_dir else {})


def _emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def _out(line: str = "") -> None:
    sys.stdout.write(line + "\n")


# --- search / files ---------------------------------------------------------------------------
def _cmd_search(args: argparse.Namespace) -> int:
    results = search_models(
        args.query, kind=args.kind, sort=args.sort, limit=args.limit, settings=_settings(args)
    )
    if args.json:
        _emit_json([r.to_dict() for r in results])
        return 0
    if not results:
        _out("no models found")
        return 0
    _out(f"{'REPO':<56} {'KIND':<11} {'DOWNLOADS':>10} {'LIKES':>6}  UPDATED")
    for r in results:
        gated = " (gated)" if r.gated else ""
        _out(
            f"{r.repo_id + gated:<56} {r.kind:<11} {r.downloads or 0:>10} {r.likes or 0:>6}  "
            f"{(r.last_modified or '')[:10]}"
        )
    return 0


def _inspect(args: argparse.Namespace, listing: RepoListing) -> dict[str, dict[str, Any]]:
    """GGUF metadata of each GGUF file, read remotely from its header (a few MB per file)."""
    result: dict[str, dict[str, Any]] = {}
    for f in listing.gguf_files:
        header = remote_gguf_header(
            listing.repo_id, f.path, revision=listing.revision, settings=_settings(args)
        )
        result[f.path] = {
            "architecture": header.architecture,
            "file_type": header.file_type_name,
            "parameter_count": header.parameter_count,
            "context_length": header.context_length,
            "has_chat_template": header.chat_template is not None,
        }
    return result


def _cmd_files(args: argparse.Namespace) -> int:
    listing = list_repo_files(args.repo, revision=args.revision, settings=_settings(args))
    metadata = _inspect(args, listing) if args.inspect else {}
    if args.json:
        data = listing.to_dict()
        for entry in data["files"]:
            if entry["path"] in metadata:
                entry["metadata"] = metadata[entry["path"]]
        _emit_json(data)
        return 0
    _out(f"{listing.repo_id} @ {listing.revision}" + ("  (gated)" if listing.gated else ""))
    for f in listing.files:
        meta = metadata.get(f.path)
        quant = (meta["file_type"] if meta else None) or f.quant or ""
        extra = f"  {meta['architecture']}, ctx {meta['context_length']}" if meta else ""
        _out(f"  {f.path:<60} {human_bytes(f.size):>10}  {f.kind:<11} {quant}{extra}")
    if listing.is_safetensors_source:
        _out("safetensors model: 'quantdesk models pull' fetches it for conversion to GGUF")
    return 0


# --- pull ---------------------------------------------------------------------------------------
def _cmd_pull(args: argparse.Namespace) -> int:
    with JobSession(jsonl=args.progress_jsonl) as session:

        def report(p: DownloadProgress) -> None:
            session.emit(
                ProgressEvent(
                    stage=p.stage,
                    done=p.done_bytes,
                    total=p.total_bytes or 0,
                    message=p.filename,
                    phase=p.file_index - 1,
                    phases=p.file_count,
                    per_s=p.bytes_per_s,
                    eta_s=p.eta_s,
                )
            )

        progress = report if args.progress_jsonl else TerminalProgressBar(sys.stderr)
        manager = DownloadManager(_settings(args), progress=progress, cancel=session.cancel)
        paths = manager.pull(args.repo, args.files or None, revision=args.revision)
        session.result({"paths": [str(p) for p in paths]})
    if not args.progress_jsonl:
        for path in paths:
            _out(str(path))
    return 0


# --- list / rm ----------------------------------------------------------------------------------
def _cmd_list(args: argparse.Namespace) -> int:
    entries = ModelLibrary(_settings(args)).entries()
    if args.json:
        _emit_json([e.to_dict() for e in entries])
        return 0
    _out(
        f"{'NAME':<52} {'SIZE':>9} {'ARCH':<10} {'PARAMS':>8} {'QUANT':<8} {'BPW':>5} "
        f"{'CTX':>7} CHAT"
    )
    for e in entries:
        params = f"{e.parameter_count / 1e9:.2f}B" if e.parameter_count else "?"
        bpw = f"{e.bits_per_weight:.2f}" if e.bits_per_weight else "?"
        chat = "yes" if e.has_chat_template else "no"
        name = e.name + (" (embedded)" if e.source == "embedded" else "")
        _out(
            f"{name:<52} {human_bytes(e.size_bytes):>9} {e.architecture or '?':<10} {params:>8} "
            f"{e.file_type or '?':<8} {bpw:>5} {e.context_length or 0:>7} {chat}"
        )
        if e.error:
            _out(f"    {e.error}")
    return 0


def _cmd_partials(args: argparse.Namespace) -> int:
    manager = DownloadManager(_settings(args))
    if args.discard:
        removed = manager.discard_partial_downloads() + manager.discard_unfinished_outputs()
        for path, size in removed:
            _out(f"deleted {path} ({human_bytes(size)})")
        for o in manager.unfinished_outputs():
            _out(f"kept {o.path.name}: a running quantisation is writing it")
        _out(f"freed {human_bytes(sum(size for _, size in removed))}")
        return 0
    parts = manager.partial_downloads()
    for path, size in parts:
        _out(f"{human_bytes(size):>9}  {path}")
    _out(
        f"{len(parts)} unfinished download(s), {human_bytes(sum(s for _, s in parts))}; "
        "'quantdesk models pull' resumes one, --discard deletes them"
    )
    outputs = manager.unfinished_outputs()
    for o in outputs:
        state = "being written" if o.in_use else "left by a quantisation that died"
        _out(f"{human_bytes(o.size):>9}  {o.path}  ({state})")
    if outputs:
        dead = [o for o in outputs if not o.in_use]
        _out(
            f"{len(outputs)} unfinished quantisation output(s), "
            f"{human_bytes(sum(o.size for o in outputs))}; --discard deletes the "
            f"{len(dead)} left by runs that died ({human_bytes(sum(o.size for o in dead))})"
        )
    return 0


def _cmd_rm(args: argparse.Namespace) -> int:
    removed = ModelLibrary(_settings(args)).delete(args.name)
    for path in removed:
        _out(f"deleted {path}")
    return 0


# --- fit ----------------------------------------------------------------------------------------
# ``models fit`` exits with this when the model won't fit, so scripts can tell (1 and 2 are
# errors, 3 a model that is not found).
WONT_FIT_EXIT = 4
_PROJECTOR = {"mmproj", "no_mmproj"}  # the media flags that change memory use


def _print_fit(est: FitEstimate) -> None:
    # with --rpc workers the offload devices are theirs (and any local GPUs)
    dev = "offload" if any(g.name.startswith("RPC") for g in est.gpus) else "GPU"
    _out(f"model:   {est.model} ({est.architecture}, {est.n_layer} layers)")
    _out(
        f"context: {est.kv_cells} cells, K {est.cache_type_k} / V {est.cache_type_v}, "
        f"flash attention {'on' if est.flash_attn else 'off'}, {est.n_gpu_layers} layers on {dev}"
    )
    _out(
        f"weights: {human_bytes(est.weights_bytes):>10}  "
        f"({dev} {human_bytes(est.weights_gpu_bytes)}, "
        f"CPU {human_bytes(est.weights_cpu_bytes)})"
    )
    _out(
        f"KV:      {human_bytes(est.kv_bytes):>10}  (K {human_bytes(est.kv_k_bytes)}, "
        f"V {human_bytes(est.kv_v_bytes)})"
    )
    _out(f"compute: {human_bytes(est.compute_bytes):>10}")
    if est.session_cache_bytes:
        _out(
            f"cache:   {human_bytes(est.session_cache_bytes):>10}  "
            "(--cache-ram: the most that sessions kept in RAM take)"
        )
    _out(
        f"total:   {human_bytes(est.total_bytes):>10}  ({dev} {human_bytes(est.gpu_bytes)}, "
        f"RAM {human_bytes(est.cpu_bytes)})"
    )
    free = f"free RAM {human_bytes(est.ram_free_bytes)}"
    if est.vram_free_bytes is not None:
        free += f", free {'on the devices' if dev == 'offload' else 'VRAM'} "
        free += human_bytes(est.vram_free_bytes)
    elif est.gpu_note:
        free += f" ({est.gpu_note})"
    _out(free)
    if est.gpu_note and est.vram_free_bytes is not None:
        _out(f"note:    {est.gpu_note}")
    if len(est.gpus) > 1 or any(g.name.startswith("RPC") for g in est.gpus):
        for share in est.gpus:
            _out(
                f"device:  {share.name}: {human_bytes(share.needed_bytes)} of "
                f"{human_bytes(share.free_bytes)} free"
            )
    if est.placement:
        _out(f"layers:  {'; '.join(est.placement)}")
    for warning in est.warnings:
        _out(f"warning: {warning}")
    if est.draft_bytes:
        _out(f"draft model (-md): {human_bytes(est.draft_bytes)} of the total")
    if est.projector_bytes:
        _out(f"projector (--mmproj): {human_bytes(est.projector_bytes)} of the total")
    _out(f"verdict: {est.verdict}: {est.message}")


def _cmd_fit(args: argparse.Namespace) -> int:
    library = ModelLibrary(_settings(args))
    model = library.resolve(args.model)
    header = read_gguf_header(model)
    knobs = settings_from_args(EngineSettings, args)  # QUANTDESK_* environment, then the flags
    draft = read_gguf_header(library.resolve(knobs.model_draft)) if knobs.model_draft else None
    projector = projector_path(model, knobs.mmproj, knobs.no_mmproj)
    estimate = estimate_fit(
        header,
        knobs,
        probe_memory(knobs.rpc),
        draft=draft,
        projector=read_gguf_header(projector) if projector else None,
    )
    if args.json:
        _emit_json(estimate.to_dict())
    else:
        _print_fit(estimate)
    return WONT_FIT_EXIT if estimate.verdict == "wont_fit" else 0


# --- registration -------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    models = subparsers.add_parser("models", help="search the Hub, download and manage models")
    models.add_argument("--models-dir", help="library folder (default: QUANTDESK_HOME/models)")
    sub = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    p = sub.add_parser("search", help="search the Hugging Face Hub")
    p.add_argument("query")
    p.add_argument(
        "--kind",
        choices=get_args(ModelKind),
        default="gguf",
        help="GGUF repos, text-generation safetensors repos, or any (default gguf)",
    )
    p.add_argument(
        "--sort",
        choices=get_args(SortKey),
        default="downloads",
        help="order of the results (default downloads)",
    )
    p.add_argument(
        "--limit", type=positive_int, default=20, help="at most this many results (default 20)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_search)

    p = sub.add_parser("files", help="list a repo's files with sizes and quant types")
    p.add_argument("repo")
    p.add_argument("--revision", help="a branch, tag or commit (default: main)")
    p.add_argument(
        "--inspect",
        action="store_true",
        help="also read each GGUF's header remotely (quant type from metadata)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_files)

    p = sub.add_parser("pull", help="download files into the library (resumable, verified)")
    p.add_argument("repo")
    p.add_argument("files", nargs="*", metavar="FILE")
    p.add_argument("--revision", help="a branch, tag or commit (default: main)")
    add_progress_jsonl_option(p)
    p.set_defaults(handler=_cmd_pull)

    p = sub.add_parser("list", help="list the models in the library")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser(
        "partials",
        help="list unfinished downloads and quantisation outputs, or --discard them",
    )
    p.add_argument("--discard", action="store_true", help="delete those no process is writing")
    p.set_defaults(handler=_cmd_partials)

    p = sub.add_parser("rm", help="delete a model from the library")
    p.add_argument("name")
    p.set_defaults(handler=_cmd_rm)

    p = sub.add_parser(
        "fit",
        help="estimate memory use and whether a model fits",
        description="Estimate weights, KV cache and compute buffers against free RAM and "
        f"VRAM. Exit status: 0 fits (or fits with partial offload), {WONT_FIT_EXIT} won't fit. "
        "Flags not given take the serve defaults.",
    )
    p.add_argument("model", help="a GGUF path, a library name, or 'default'")
    # serve's own flags, but for the model (an argument here) and threads (no memory)
    add_settings_flags(p, ServingKnobs, skip=("model", "threads"))
    # the draft model's memory counts too; the other speculative flags use none
    drafting = set(SpeculativeKnobs.model_fields) - {"model_draft", "gpu_layers_draft"}
    add_settings_flags(p, SpeculativeKnobs, skip=drafting)
    # the projector's memory counts too; the media limits and sources use none
    add_settings_flags(p, MediaKnobs, skip=tuple(set(MediaKnobs.model_fields) - _PROJECTOR))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler=_cmd_fit)
