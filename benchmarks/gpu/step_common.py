"""What the server steps share: quantdesk / llama-server command lines with one set of knobs,
NVML readings, ``quantdesk models fit --json``, and a small load to prove a server answers."""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.bench import BenchConfig, run_benchmark
from benchmarks.cpu_path import ours_cpu_path, peer_repack_flags
from benchmarks.gpu.kit_env import KitPaths
from benchmarks.peer_servers import Knobs, ServerSpec, shared_flags, started

# Dry run: a server may not take more address space than this, so an over-big context fails
# its allocation here instead of touching more RAM than the shared machine has.
DRY_RUN_ADDRESS_LIMIT = 12 << 30


@dataclass
class ServeKnobs:
    """The flags both servers get (``peer_servers.Knobs`` plus offload and KV types)."""

    model: Path
    threads: int
    parallel: int
    ctx: int
    batch: int
    ubatch: int
    ngl: int
    flash_attn: str = "on"
    cache_type: str = "f16"
    extra: list[str] = field(default_factory=list)

    def knobs(self) -> Knobs:
        return Knobs(self.model, self.threads, self.parallel, self.ctx, self.batch, self.ubatch)

    def engine_flags(self) -> list[str]:
        return [
            "-ngl",
            str(self.ngl),
            "-fa",
            self.flash_attn,
            "-ctk",
            self.cache_type,
            "-ctv",
            self.cache_type,
        ]

    def fit_flags(self) -> list[str]:
        return [
            "-c",
            str(self.ctx),
            "-np",
            str(self.parallel),
            "-b",
            str(self.batch),
            "-ub",
            str(self.ubatch),
            *self.engine_flags(),
        ]


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (DRY_RUN_ADDRESS_LIMIT, DRY_RUN_ADDRESS_LIMIT))


def ours_spec(paths: KitPaths, sk: ServeKnobs, name: str = "ours") -> ServerSpec:
    def argv(k: Knobs, port: int) -> list[str]:
        head = paths.quantdesk("serve", "--model", str(k.model), "--spec-type", "none")
        return head + shared_flags(k, port) + sk.engine_flags() + sk.extra

    return ServerSpec(name, argv, cwd=paths.root)


def llama_server_spec(paths: KitPaths, sk: ServeKnobs) -> ServerSpec:
    ngl = "99" if sk.ngl < 0 else str(sk.ngl)

    def argv(k: Knobs, port: int) -> list[str]:
        head = [str(paths.llama_server), "-m", str(k.model), "--no-webui"]
        flags = ["-ngl", ngl, "-fa", sk.flash_attn, "-ctk", sk.cache_type, "-ctv", sk.cache_type]
        # layers left on the host CPU (a Xeon with AMX, often) take ours' CPU path on both sides
        flags += peer_repack_flags(ours_cpu_path(paths.quantdesk()))
        return head + shared_flags(k, port) + flags

    return ServerSpec("llama-server", argv, cwd=paths.root)


@contextlib.contextmanager
def serving(
    spec: ServerSpec, sk: ServeKnobs, log: Path, timeout_s: float
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with started(spec, sk.knobs(), log, timeout_s) as (url, proc):
        yield url, proc


def fit_json(paths: KitPaths, sk: ServeKnobs) -> dict[str, Any]:
    """``quantdesk models fit MODEL ... --json``: exit 0 fits, 4 won't fit; both give JSON."""
    cmd = paths.quantdesk("models", "fit", str(sk.model), *sk.fit_flags(), "--json")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if res.returncode not in (0, 4):
        raise RuntimeError(f"models fit exited {res.returncode}: {res.stderr.strip()[-400:]}")
    data: dict[str, Any] = json.loads(res.stdout)
    data["exit_code"] = res.returncode
    return data


FIT_KEYS = (
    "verdict",
    "message",
    "n_gpu_layers",
    "weights_gpu_bytes",
    "kv_gpu_bytes",
    "compute_gpu_bytes",
    "gpu_bytes",
    "cpu_bytes",
    "total_bytes",
    "kv_bytes",
    "vram_free_bytes",
    "ram_free_bytes",
    "suggested_gpu_layers",
    "suggested_n_ctx",
    "gpu_note",
)


def fit_summary(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data.get(k) for k in FIT_KEYS}


# --- NVML ------------------------------------------------------------------------------------
def nvml_device() -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:
        return None


def nvml_used(handle: Any | None) -> int | None:
    if handle is None:
        return None
    import pynvml

    return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)


def nvml_process_used(handle: Any | None, pids: set[int]) -> int | None:
    """VRAM NVML charges to these processes (None where the driver does not say)."""
    if handle is None:
        return None
    import pynvml

    try:
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception:
        return None
    used = [p.usedGpuMemory for p in procs if p.pid in pids and p.usedGpuMemory is not None]
    return int(sum(used)) if used else None


def tree_pids(pid: int) -> set[int]:
    import psutil

    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        return {pid, *(c.pid for c in proc.children(recursive=True))}
    return {pid}


def small_load(url: str, concurrency: int, max_tokens: int, prompt_tokens: int) -> dict[str, Any]:
    """One short wave of requests: proof that the server generates, and its speed."""
    config = BenchConfig(
        url=url,
        label="probe",
        concurrency=(concurrency,),
        repetitions=1,
        requests_per_client=1,
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        shared_prefix_tokens=0,
        warmup=False,
        request_timeout_s=120,
    )
    result = run_benchmark(config)
    rep = result.scenarios[0].levels[0].repetitions[0]
    return {
        "concurrency": concurrency,
        "tokens_per_s": round(rep.tokens_per_s, 1),
        "ttft_ms_p50": round(rep.ttft_ms_p50, 1),
        "errors": rep.errors,
        "notes": result.notes,
    }


def get_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    import httpx

    data: dict[str, Any] = httpx.get(url, timeout=timeout).json()
    return data


def server_step_args(*, n_layer: bool = False) -> tuple[argparse.Namespace, KitPaths]:
    """A server step's command line (``--model --ctx --parallel --threads``, and
    ``--n-layer``) and the kit's paths, its log folder made."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    if n_layer:
        p.add_argument("--n-layer", type=int, required=True)
    for flag in ("--ctx", "--parallel", "--threads"):
        p.add_argument(flag, type=int, required=True)
    args = p.parse_args()
    paths = KitPaths.from_env()
    paths.logs.mkdir(parents=True, exist_ok=True)
    return args, paths


def run_step(main: Callable[[], dict[str, Any]]) -> int:
    """Run a step's body; its answer (or its exception) is the step's one JSON line."""
    from benchmarks.gpu.kit_env import emit

    try:
        emit(main())
    except Exception as exc:
        import traceback

        traceback.print_exc()
        emit({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    sys.stdout.flush()
    return 0
