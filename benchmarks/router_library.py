"""router_compare's models: the two GGUF files, a library folder both routers serve, and an
environment that keeps the user's settings and caches out of the run."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks.peer_servers import ROOT

log = logging.getLogger(__name__)

DEFAULT_CACHE = ROOT / "build" / "router-compare"
"""Where the requantised model B is made once (git-ignored)."""


def requantised(source: Path, qtype: str, cache: Path, threads: int) -> Path:
    """``source`` quantised to ``qtype`` with ``quantdesk quantize --allow-requantize``, made
    once under ``cache/<source stem>/`` and reused by later runs."""
    folder = cache / source.name.removesuffix(".gguf")
    made = sorted(folder.glob(f"*-{qtype}.gguf"))
    if made:
        return made[0]
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "backend.entrypoints.main", "quantize", str(source)]
    argv += ["--type", qtype, "--out", str(folder), "--allow-requantize"]
    argv += ["--threads", str(threads)]
    log.info("making model B: %s", " ".join(argv))
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    made = sorted(folder.glob(f"*-{qtype}.gguf"))
    if done.returncode != 0 or not made:
        raise RuntimeError(f"quantize failed ({done.returncode}): {done.stderr[-2000:]}")
    return made[0]


def build_library(models_dir: Path, sources: list[Path]) -> list[str]:
    """Link each source into ``models_dir`` under its own file name and return the model ids.
    Both routers name a top-level ``NAME.gguf`` in their models folder ``NAME`` (ours: the
    library name, its path less ``.gguf``; llama-server: the file name less ``.gguf``)."""
    names = [p.name for p in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"the models need distinct file names: {names}")
    models_dir.mkdir(parents=True, exist_ok=True)
    for source in sources:
        link = models_dir / source.name
        try:
            link.symlink_to(source.resolve())
        except OSError:
            shutil.copyfile(source, link)
    return [name.removesuffix(".gguf") for name in names]


@contextlib.contextmanager
def isolated_env(home: Path, llama_cache: Path) -> Iterator[None]:
    """The servers started inside see a fresh QuantDesk home (no per-model settings of the
    user's), no QUANTDESK_*/LLAMA_ARG_* settings, and an empty llama.cpp model cache (so
    llama-server's router lists only the models folder); the environment is restored after."""
    saved = dict(os.environ)
    for name in list(os.environ):
        if name.startswith(("QUANTDESK_", "LLAMA_ARG_")):
            del os.environ[name]
    home.mkdir(parents=True, exist_ok=True)
    llama_cache.mkdir(parents=True, exist_ok=True)
    os.environ["QUANTDESK_HOME"] = str(home)
    os.environ["LLAMA_CACHE"] = str(llama_cache)
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
