"""Like for like on the CPU: which path ours takes (``quantdesk doctor --json``), and the
flag that gives llama-server the same one.

Where ours loads without llama.cpp's extra buffer types (``-nr``, ``QUANTDESK_NO_REPACK``, or
the CPU probe's verdict on a host whose repacked kernels fault), the peer gets ``-nr`` too;
each result records both sides' path.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _doctor(command: tuple[str, ...]) -> dict[str, Any]:
    done = subprocess.run(
        [*command, "doctor", "--json"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"quantdesk doctor --json exited {done.returncode}: {done.stderr[-300:]}"
        )
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def ours_cpu_path(quantdesk: list[str] | None = None) -> dict[str, Any]:
    """Ours' CPU path (path, use_extra_bufts, extra_buffers, reason) with the environment of
    this run; ``quantdesk`` is the command that starts ours (default: this venv's)."""
    command = quantdesk or [sys.executable, "-m", "backend.entrypoints.main"]
    return _doctor(tuple(command))


def peer_repack_flags(ours: dict[str, Any]) -> list[str]:
    """llama-server's flags for ours' CPU path: ``-nr`` where ours runs without extra buffers."""
    return [] if ours.get("use_extra_bufts", True) else ["-nr"]


def paths_record(ours: dict[str, Any]) -> dict[str, Any]:
    """What a result says of the CPU path both sides used."""
    peer = "plain" if peer_repack_flags(ours) else ours.get("path", "?")
    return {"ours": ours, "llama_server": {"path": peer, "flags": peer_repack_flags(ours)}}
