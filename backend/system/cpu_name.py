"""The CPU's model name, as people read it (``/proc/cpuinfo``'s "model name" on Linux)."""

from __future__ import annotations

import platform


def cpu_model() -> str:
    """The first "model name" of ``/proc/cpuinfo``; elsewhere what :mod:`platform` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
