"""The servers peer_compare runs: their command lines, start-up, RSS sampling and stats."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.cpu_path import ours_cpu_path, peer_repack_flags

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DEFAULT_LLAMA_SERVER = ROOT / "build" / "peers" / "llama-server" / "bin" / "llama-server"


@dataclass
class Knobs:
    model: Path
    threads: int
    parallel: int
    ctx: int
    batch: int
    ubatch: int
    kv_unified: bool = False


@dataclass
class ServerSpec:
    name: str
    argv: Callable[[Knobs, int], list[str]]
    health_path: str = "/health"
    bench_overrides: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    cwd: Path = ROOT
    extra_flags: list[str] = field(default_factory=list)
    """Appended to the command line (``peer_compare --ours-flags "..."`` and the like)."""

    def command(self, knobs: Knobs, port: int) -> list[str]:
        return self.argv(knobs, port) + self.extra_flags


def ours_in(tree: Path) -> Callable[[Knobs, int], list[str]]:
    """QuantDesk from a checkout (``git worktree add``) of this repo, e.g. the code before a
    change: same venv, that tree's packages (it runs with ``cwd=tree``)."""
    new_layout = (tree / "backend" / "entrypoints" / "main.py").is_file()
    module = "backend.entrypoints.main" if new_layout else "backend.cli.main"

    settings = tree / "backend" / "settings" / "engine_settings.py"
    per_slot_default = settings.is_file() and '"--kv-unified"' in settings.read_text()

    def argv(k: Knobs, port: int) -> list[str]:
        head = [str(VENV_BIN / "python"), "-m", module, "serve", "--model", str(k.model)]
        if per_slot_default:
            layout = ["--kv-unified"] if k.kv_unified else []
        else:  # a checkout from before the per-slot default
            layout = [] if k.kv_unified else ["--kv-per-slot"]
        return head + shared_flags(k, port) + layout

    return argv


def ours_library_argv(k: Knobs, port: int) -> list[str]:
    """QuantDesk's default path: ``quantdesk serve`` without ``-m``, the router, serving a
    fresh library folder that holds only ``knobs.model`` (a link to it); the model's own
    server is a child process the router streams through. The checkout is the spec's cwd."""
    library = Path(tempfile.mkdtemp(prefix="quantdesk-router-lib-"))
    (library / k.model.name).symlink_to(k.model.resolve())
    head = [str(VENV_BIN / "python"), "-m", "backend.entrypoints.main", "serve"]
    layout = ["--kv-unified"] if k.kv_unified else []
    return [*head, "--models-dir", str(library), *shared_flags(k, port), *layout]


def shared_flags(k: Knobs, port: int) -> list[str]:
    """The flags ours and llama-server spell alike."""
    knobs = {"--host": "127.0.0.1", "--port": port, "-np": k.parallel, "-t": k.threads}
    knobs |= {"-tb": k.threads, "-c": k.ctx, "-b": k.batch, "-ub": k.ubatch}
    return [str(part) for flag, value in knobs.items() for part in (flag, value)]


ours_argv = ours_in(ROOT)


def llama_server_argv(binary: Path) -> Callable[[Knobs, int], list[str]]:
    def argv(k: Knobs, port: int) -> list[str]:
        head = [str(binary), "-m", str(k.model)]
        layout = ["-kvu"] if k.kv_unified else []
        # -nr where ours runs without extra buffer types (like for like on the CPU)
        return (
            head
            + shared_flags(k, port)
            + ["--no-webui"]
            + layout
            + peer_repack_flags(ours_cpu_path())
        )

    return argv


def llama_cpp_python_argv(k: Knobs, port: int) -> list[str]:
    # one sequence at a time: its context only needs to hold one request
    return [
        str(VENV_BIN / "python"),
        "-m",
        "llama_cpp.server",
        "--model",
        str(k.model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        str(k.threads),
        "--n_threads_batch",
        str(k.threads),
        "--n_ctx",
        str(max(2048, k.ctx // k.parallel)),
        "--n_batch",
        str(k.batch),
        "--n_ubatch",
        str(k.ubatch),
        "--interrupt_requests",
        "False",
    ]


def eog_logit_bias(model: Path) -> dict[str, float]:
    """Ban end-of-generation tokens: the way to fix the output length on a server that
    ignores ``ignore_eos`` but honours ``logit_bias`` (llama-cpp-python's)."""
    import llama_cpp

    llm = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    return {str(i): -100.0 for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


@contextlib.contextmanager
def started(
    spec: ServerSpec, knobs: Knobs, log_path: Path, timeout_s: float
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    argv = spec.command(knobs, port)
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    fresh_home = None
    if "QUANTDESK_HOME" not in env:  # ours starts cold, as llama-server does: no disk cache
        fresh_home = tempfile.mkdtemp(prefix="bench-home-")
        env["QUANTDESK_HOME"] = fresh_home
    with log_path.open("wb") as log:
        log.write((" ".join(argv) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=spec.cwd, env=env)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{spec.name} exited with {proc.returncode}; see {log_path}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + spec.health_path, timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{spec.name} not healthy after {timeout_s:.0f} s")
                time.sleep(0.5)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if fresh_home is not None:
                shutil.rmtree(fresh_home, ignore_errors=True)


@contextlib.contextmanager
def peak_rss(procs: dict[str, psutil.Process]) -> Iterator[dict[str, int]]:
    """Sample each process tree's RSS every 0.5 s; yields name -> peak so far."""
    peak = {name: tree_rss(ps) for name, ps in procs.items()}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            for name, ps in procs.items():
                with contextlib.suppress(psutil.Error):
                    peak[name] = max(peak[name], tree_rss(ps))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        stop.set()
        sampler.join()


def ours_stats(url: str) -> dict[str, Any]:
    """Model and KV sizes from our /v1/stats, for the RSS target (model + KV + 400 MB)."""
    try:
        stats = httpx.get(url + "/v1/stats", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return {
        "model_size_bytes": stats.get("model", {}).get("size_bytes"),
        "kv_bytes_total": stats.get("kv", {}).get("bytes_total"),
        "prefix_cache": stats.get("prefix_cache"),
        "step": stats.get("step"),
    }
