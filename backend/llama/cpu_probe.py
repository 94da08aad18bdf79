"""A one-time guard against CPU faults in llama.cpp's repacked weight kernels.

Some builds fault on some CPUs on the first repacked matmul (llama.cpp #20824: ggml's AMX
kernels on Sapphire Rapids and later). Our wheel carries a fix for that one; this guard is for
what we cannot foresee. Before the first model load on a machine, a child process loads the
embedded model with the extra buffer types on and decodes a few tokens
(:mod:`backend.llama.cpu_probe_child`). If the child dies on a signal, the verdict is kept in
``QUANTDESK_HOME/cpu-probe/<key>.json``, keyed by the llama.cpp libraries' build and the CPU's
flags, and every later load on this machine and build runs with ``use_extra_bufts=false``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock

from backend.llama.rpc_ggml import llama_lib_dir
from backend.settings.paths import subdir

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 180.0
# bump when the probe child changes what it runs: verdicts of an older probe are then ignored
# (the source itself is not read: a frozen bundle ships no .py files)
PROBE_VERSION = 2


@dataclass(frozen=True)
class CpuVerdict:
    """Whether llama.cpp's extra buffer types are safe on this CPU with this build."""

    extra_bufts_safe: bool
    detail: str  # "probe passed", "probe child died on SIGSEGV", ...
    key: str

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"


def _build_id() -> str:
    """The llama.cpp and ggml libraries llama-cpp-python loads, by name, size and mtime: a
    rebuilt or reinstalled wheel changes it. Their bytes are not hashed: a CUDA build's
    libggml-cuda runs to hundreds of MB, read at every process start."""
    folder = llama_lib_dir()
    libs = sorted(folder.glob("*")) if folder.is_dir() else []
    return ";".join(
        f"{lib.name}:{st.st_size}:{st.st_mtime_ns}"
        for lib in libs
        if ("llama" in lib.name or "ggml" in lib.name) and lib.is_file()
        for st in [lib.stat()]
    )


def verdict_key() -> str:
    """The key of this machine's verdict: the libraries' build, the CPU's flags and the
    probe's own code."""
    digest = hashlib.sha256(_build_id().encode())
    digest.update(_cpu_flags().encode())
    # and the probe itself: a verdict from an older probe is not this probe's
    digest.update(f"probe {PROBE_VERSION}".encode())
    return digest.hexdigest()[:24]


def _verdict_file(key: str) -> Path:
    return subdir("cpu-probe") / f"{key}.json"


def load_verdict(key: str | None = None) -> CpuVerdict | None:
    """The verdict kept for this build and CPU, or None when there is none (or it is
    unreadable)."""
    key = key or verdict_key()
    path = _verdict_file(key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return CpuVerdict(bool(data["extra_bufts_safe"]), str(data["detail"]), key)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("ignoring an unreadable CPU probe verdict %s", path)
        return None


def forget_verdict() -> None:
    """Drop this build and CPU's kept verdict, so the next load probes again."""
    _verdict_file(verdict_key()).unlink(missing_ok=True)


def probe_command(model_path: Path) -> list[str]:
    return [sys.executable, "-m", "backend.llama.cpu_probe_child", str(model_path)]


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def run_probe(command: list[str], key: str, timeout_s: float = PROBE_TIMEOUT_S) -> CpuVerdict:
    """Run the probe child ``command``; keep and return the verdict when it is conclusive
    (the child passed, or died on a signal). A child that fails otherwise (a missing model,
    a time-out) proves nothing about the CPU: its verdict is "safe", not kept."""
    started = time.monotonic()
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        log.warning("the CPU probe did not finish in %.0f s; keeping extra buffers on", timeout_s)
        return CpuVerdict(True, "probe timed out (inconclusive)", key)
    except OSError as exc:
        log.warning("the CPU probe could not start (%s); keeping extra buffers on", exc)
        return CpuVerdict(True, f"probe could not start: {exc}", key)
    if done.returncode < 0:
        verdict = CpuVerdict(False, f"probe child died on {_signal_name(done.returncode)}", key)
    elif done.returncode == 0:
        verdict = CpuVerdict(True, "probe passed", key)
    else:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        log.warning(
            "the CPU probe failed with exit code %d (%s); keeping extra buffers on",
            done.returncode,
            tail[0],
        )
        return CpuVerdict(True, f"probe failed with exit code {done.returncode}", key)
    path = _verdict_file(key)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(verdict.to_json(), indent=1), encoding="utf-8")
    tmp.replace(path)
    log.info(
        "CPU probe (%.1f s): %s; verdict kept in %s",
        time.monotonic() - started,
        verdict.detail,
        path,
    )
    return verdict


def ensure_verdict(command: list[str] | None = None) -> CpuVerdict:
    """This machine's verdict: the kept one, else a probe run now (once, across processes)."""
    key = verdict_key()
    verdict = load_verdict(key)
    if verdict is not None:
        return verdict
    with FileLock(str(_verdict_file(key)) + ".lock"):
        verdict = load_verdict(key)  # another process may have probed while we waited
        if verdict is not None:
            return verdict
        if command is None:
            from backend.settings.default_model import default_model_path

            command = probe_command(default_model_path())
        log.info("probing llama.cpp's repacked CPU kernels once on this machine")
        return run_probe(command, key)
