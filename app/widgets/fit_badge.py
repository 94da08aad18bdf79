"""A coloured pill that says whether a model fits this machine, and the check behind it.

The verdict comes from ``backend.fit.fit_estimate`` (weights, KV cache and compute
buffer against free RAM/VRAM) with the Server page's knobs; for a Hub file the GGUF
header is read with HTTP Range requests, never the weights.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from app.page_models.fit_adapter import ShownVerdict
from app.storage.app_settings import ServerKnobs
from app.theme import BAD, GOOD, IDLE, WARN
from backend.core.errors import QuantDeskError
from backend.fit.fit_estimate import estimate_fit
from backend.fit.memory_probe import probe_memory

log = logging.getLogger(__name__)

_SPLIT_PART = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)

# What a verdict looks like: its words and its colour (the badge and the Server page's fit bar).
VERDICT_LOOKS: dict[ShownVerdict, tuple[str, str]] = {
    "fits": ("Fits", GOOD),
    "partial_offload": ("Partial offload", WARN),
    "wont_fit": ("Won't fit", BAD),
    "unknown": ("Unknown", IDLE),
}


@dataclass(frozen=True)
class FitVerdict:
    verdict: ShownVerdict
    message: str


def remote_fits(
    repo_id: str,
    filenames: list[str],
    knobs: ServerKnobs,
    revision: str | None = None,
    limit: int = 24,
) -> dict[str, FitVerdict]:
    """Fit verdicts for GGUF files of a Hub repo (blocking: run it in a worker)."""
    from backend.hub.hub_search import remote_gguf_header

    memory = probe_memory()
    out: dict[str, FitVerdict] = {}
    for name in filenames[:limit]:
        split = _SPLIT_PART.search(name)
        if split and int(split.group(1)) != 1:
            continue  # judged with its first part
        try:
            header = remote_gguf_header(repo_id, name, revision=revision)
            est = estimate_fit(header, knobs, memory)
            message = est.message
            if split:
                message += " (first part of a split model only)"
            out[name] = FitVerdict(est.verdict, message)
        except (QuantDeskError, OSError, ValueError) as exc:
            out[name] = FitVerdict("unknown", f"could not read the header: {exc}")
    return out


class FitBadge(QLabel):
    """``Fits`` (green), ``Partial offload`` (amber), ``Won't fit`` (red) or ``Unknown``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.verdict: ShownVerdict = "unknown"
        self.set_verdict(FitVerdict("unknown", "checking…"))

    def set_verdict(self, fit: FitVerdict) -> None:
        self.verdict = fit.verdict
        text, colour = VERDICT_LOOKS[fit.verdict]
        self.setText(text)
        self.setToolTip(fit.message)
        self.setStyleSheet(
            f"QLabel {{ color: {colour}; border: 1px solid {colour}; border-radius: 9px;"
            " padding: 1px 8px; font-size: 11px; font-weight: 600; background: transparent; }"
        )
