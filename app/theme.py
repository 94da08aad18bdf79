"""The dark theme: the QSS from ``assets/``, a matching palette, icons and chart colours."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QColor, QIcon, QPalette
from PySide6.QtWidgets import QApplication

import assets

ASSETS_DIR = Path(assets.__file__).resolve().parent

# Chart series colours: distinct on the dark background, colour-blind friendly order.
SERIES = ("#6e8bff", "#f2a541", "#4fc1a6", "#e86a92", "#b48cff", "#9fd356")
GOOD, WARN, BAD, IDLE = "#3fb950", "#d29922", "#f85149", "#6f7889"
BG, SURFACE, TEXT, MUTED = "#14161b", "#1b1e25", "#e4e7ee", "#8f98a8"


def icon(name: str) -> QIcon:
    """An icon from ``assets/icons/<name>.svg`` (an empty icon if missing)."""
    path = ASSETS_DIR / "icons" / f"{name}.svg"
    return QIcon(str(path)) if path.is_file() else QIcon()


def stylesheet() -> str:
    return (ASSETS_DIR / "theme.qss").read_text(encoding="utf-8")


def apply_theme(app: QApplication) -> None:
    """Fusion style + dark palette + the QSS, so native bits match the sheet."""
    app.setStyle("Fusion")
    palette = QPalette()
    colours = {
        QPalette.ColorRole.Window: BG,
        QPalette.ColorRole.WindowText: TEXT,
        QPalette.ColorRole.Base: "#11131a",
        QPalette.ColorRole.AlternateBase: SURFACE,
        QPalette.ColorRole.Text: TEXT,
        QPalette.ColorRole.Button: "#262b36",
        QPalette.ColorRole.ButtonText: TEXT,
        QPalette.ColorRole.Highlight: "#3d4f99",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: "#232732",
        QPalette.ColorRole.ToolTipText: TEXT,
        QPalette.ColorRole.PlaceholderText: "#6f7889",
        QPalette.ColorRole.Link: "#8aa0ff",
    }
    for role, colour in colours.items():
        palette.setColor(role, QColor(colour))
    app.setPalette(palette)
    app.setStyleSheet(stylesheet())
    app.setWindowIcon(icon("quantdesk"))
