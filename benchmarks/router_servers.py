"""The two routers router_compare runs: their command lines, start and stop, and their model
management API (``GET /models``, ``POST /models/load``, ``POST /models/unload``), which both
answer in llama-server's shape. Ours loads and unloads before it answers; llama-server's
router answers at once and changes the state later, so every call here waits for the state
(and, for an unload, for the model's process to be gone)."""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from benchmarks.cpu_path import ours_cpu_path, peer_repack_flags
from benchmarks.peer_servers import VENV_BIN, Knobs, ServerSpec, shared_flags, started, tree_rss

OURS = "ours"
BASELINE = "llama-server"
_POLL_S = 0.05


def ours_router_argv(models_max: int) -> Callable[[Knobs, int], list[str]]:
    """``quantdesk serve`` without ``-m``: the library in ``knobs.model`` (a folder)."""

    def argv(k: Knobs, port: int) -> list[str]:
        head = [str(VENV_BIN / "python"), "-m", "backend.entrypoints.main", "serve"]
        head += ["--models-dir", str(k.model), "--models-max", str(models_max)]
        return head + shared_flags(k, port)

    return argv


def llama_server_router_argv(binary: Path, models_max: int) -> Callable[[Knobs, int], list[str]]:
    """llama-server's router: ``--models-dir`` and ``--models-max``; the other flags are
    passed on to every model's child server."""

    def argv(k: Knobs, port: int) -> list[str]:
        head = [str(binary), "--models-dir", str(k.model), "--models-max", str(models_max)]
        return head + shared_flags(k, port) + ["--no-webui"] + peer_repack_flags(ours_cpu_path())

    return argv


def router_specs(llama_server: Path, models_max: int) -> list[ServerSpec]:
    return [
        ServerSpec(OURS, ours_router_argv(models_max)),
        ServerSpec(BASELINE, llama_server_router_argv(llama_server, models_max)),
    ]


class RouterError(RuntimeError):
    """A router did not do what was asked in time, or a model failed."""


@dataclass
class Router:
    """A started router: its address, its process and how long to wait for a state."""

    name: str
    url: str
    process: psutil.Process
    timeout_s: float = 300.0

    def states(self) -> dict[str, str]:
        """Model id -> ``status.value`` from ``GET /models``."""
        data = httpx.get(f"{self.url}/models", timeout=30).json()["data"]
        return {card["id"]: str(card["status"]["value"]) for card in data}

    def _wait_state(self, model: str, wanted: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while (state := self.states().get(model)) != wanted:
            if state == "failed":
                raise RouterError(f"{self.name}: {model} failed")
            if time.monotonic() > deadline:
                raise RouterError(f"{self.name}: {model} is {state}, not {wanted}")
            time.sleep(_POLL_S)

    def load(self, model: str) -> None:
        """Load ``model`` and wait until it is ``loaded`` (nothing happens when it is)."""
        if self.states().get(model) == "loaded":
            return
        r = httpx.post(f"{self.url}/models/load", json={"model": model}, timeout=self.timeout_s)
        if r.status_code != 200 and self.states().get(model) not in ("loading", "loaded"):
            raise RouterError(f"{self.name}: loading {model}: HTTP {r.status_code} {r.text}")
        self._wait_state(model, "loaded")

    def unload(self, model: str, file_name: str) -> float:
        """Unload ``model``, wait until it is ``unloaded`` and no process of the tree runs
        ``file_name``; the seconds that took."""
        t0 = time.perf_counter()
        if self.states().get(model) != "unloaded":
            r = httpx.post(
                f"{self.url}/models/unload", json={"model": model}, timeout=self.timeout_s
            )
            if r.status_code != 200 and self.states().get(model) != "unloaded":
                raise RouterError(f"{self.name}: unloading {model}: HTTP {r.status_code} {r.text}")
        self._wait_state(model, "unloaded")
        deadline = time.monotonic() + self.timeout_s
        while self.model_processes(file_name):
            if time.monotonic() > deadline:
                raise RouterError(f"{self.name}: the process of {model} is still running")
            time.sleep(_POLL_S)
        return time.perf_counter() - t0

    def tree(self) -> list[psutil.Process]:
        return [self.process, *self.process.children(recursive=True)]

    def model_processes(self, file_name: str) -> list[psutil.Process]:
        """Processes of the tree whose command line names the model file ``file_name``."""
        found = []
        for p in self.tree():
            with contextlib.suppress(psutil.Error):
                if any(Path(arg).name == file_name for arg in p.cmdline()):
                    found.append(p)
        return found

    def rss(self, settle_s: float = 1.0, samples: int = 3) -> int:
        """Resident memory of the whole process tree once it has settled: the median of
        ``samples`` readings, 0.2 s apart, after ``settle_s``."""
        time.sleep(settle_s)
        readings = []
        for i in range(samples):
            if i:
                time.sleep(0.2)
            readings.append(tree_rss(self.process))
        return int(statistics.median(readings))


@contextlib.contextmanager
def router_up(spec: ServerSpec, knobs: Knobs, log_path: Path, timeout_s: float) -> Iterator[Router]:
    """Start the router (peer_servers.started: free port, /health, SIGTERM at the end); any
    of its children that outlive it are killed, so no model server is left behind."""
    children: list[psutil.Process] = []
    with started(spec, knobs, log_path, timeout_s) as (url, proc):
        router = Router(spec.name, url, psutil.Process(proc.pid), timeout_s)
        try:
            yield router
        finally:
            with contextlib.suppress(psutil.Error):
                children = router.process.children(recursive=True)
    _gone, alive = psutil.wait_procs(children, timeout=15)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def llama_server_version(binary: Path) -> str:
    """``llama-server --version``'s text (its build and commit), for the JSON."""
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        return f"unknown ({exc})"
    return " ".join((done.stdout + done.stderr).split())[-200:]
