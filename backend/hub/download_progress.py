"""Where a download stands, and the speed meter behind its rate and ETA."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

DownloadStage = Literal["downloading", "verifying", "done"]


@dataclass(frozen=True)
class DownloadProgress:
    """Where one download stands."""

    repo_id: str
    filename: str
    stage: DownloadStage
    done_bytes: int
    total_bytes: int | None
    bytes_per_s: float
    eta_s: float | None
    file_index: int = 1
    file_count: int = 1

    @property
    def fraction(self) -> float | None:
        if not self.total_bytes:
            return None
        return min(1.0, self.done_bytes / self.total_bytes)


ProgressCallback = Callable[[DownloadProgress], None]


class RateMeter:
    """Speed over a sliding window of a few seconds, and the ETA it implies."""

    def __init__(self, window_s: float = 3.0) -> None:
        self.window_s = window_s
        self.samples: list[tuple[float, int]] = []

    def add(self, done: int) -> float:
        now = time.monotonic()
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window_s:
            self.samples.pop(0)
        t0, d0 = self.samples[0]
        return (done - d0) / (now - t0) if now > t0 else 0.0
