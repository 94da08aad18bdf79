"""Human-readable sizes and durations: the one formatter for the CLI, the GUI and reports.

Sizes are binary (IEC) units, as llama.cpp prints them: 1536 -> ``1.5 KiB``.
"""

from __future__ import annotations


def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def text_bar(fraction: float, width: int) -> str:
    """``#####.....``: a progress bar of ``width`` characters for a terminal line."""
    filled = int(max(0.0, min(1.0, fraction)) * width)
    return "#" * filled + "." * (width - filled)
