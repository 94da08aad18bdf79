"""A coloured pill that says whether a model fits this machine.

The verdict and its reason come from :func:`app.page_models.fit_adapter.remote_fits`.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QWidget

from app.page_models.fit_adapter import FitVerdict, ShownVerdict
from app.theme import BAD, GOOD, IDLE, WARN

# What a verdict looks like: its words and its colour (the badge and the Server page's fit bar).
VERDICT_LOOKS: dict[ShownVerdict, tuple[str, str]] = {
    "fits": ("Fits", GOOD),
    "partial_offload": ("Partial offload", WARN),
    "wont_fit": ("Won't fit", BAD),
    "unknown": ("Unknown", IDLE),
}


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
