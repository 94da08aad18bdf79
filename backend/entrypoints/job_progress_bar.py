"""A terminal progress line for ``quantdesk compare``: phase, bar, tokens/s, ETA.

Drawn on stderr with ``\\r`` at most ~5 times a second; a new phase starts a new line,
so the terminal keeps one finished line per phase as a record of what ran and how fast.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from backend.core.units import human_duration, text_bar
from backend.jobs.progress import Progress


class JobProgressBar:
    def __init__(self, stream: TextIO | None = None, *, width: int = 24) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._stage: str | None = None
        self._stage_start = 0.0
        self._last_draw = 0.0
        self._drawn = False

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if p.stage != self._stage:
            if self._drawn:
                self.stream.write("\n")
            self._stage = p.stage
            self._stage_start = now
            self._last_draw = 0.0
        final = p.total > 0 and p.done >= p.total
        if not final and now - self._last_draw < 0.2:
            return
        self._last_draw = now
        self._drawn = True
        self.stream.write("\r" + self.line(p, now - self._stage_start).ljust(100))
        self.stream.flush()

    def line(self, p: Progress, elapsed: float) -> str:
        """``reference  SmolLM2-Q8_0 [#####.....] 45.0% 1,234 tok/s ETA 01:23``"""
        fraction = min(1.0, p.done / p.total) if p.total > 0 else 0.0
        bar = text_bar(fraction, self.width)
        parts = [f"{p.stage:<14} {p.message} [{bar}] {fraction * 100:5.1f}%"]
        if p.done > 0 and elapsed > 0:
            amount = p.tokens if p.tokens else p.done
            unit = "tok" if p.tokens else "steps"
            parts.append(f"{amount / elapsed:,.0f} {unit}/s")
            remaining = elapsed * (p.total - p.done) / p.done
            parts.append(f"ETA {human_duration(remaining)}")
        return " ".join(parts)

    def close(self) -> None:
        """End the current line (before a table or an error is printed)."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
