"""Visible check boxes on the dark cards.

With the app's style sheet, Fusion draws no box around an unchecked indicator, so an
unticked option reads as plain text. Pages with many options apply this sheet to their
containers: an outlined box, filled with the accent colour when ticked.
"""

from __future__ import annotations

from PySide6.QtWidgets import QWidget

CHECKBOX_QSS = (
    "QCheckBox::indicator { width: 13px; height: 13px; border: 1px solid #4a5266;"
    " border-radius: 4px; background: #11131a; }"
    " QCheckBox::indicator:hover { border-color: #6e8bff; }"
    " QCheckBox::indicator:checked { background: #5673ff; border-color: #8aa0ff; }"
    " QCheckBox::indicator:disabled { border-color: #2e3340; }"
)


def use_visible_checkboxes(widget: QWidget) -> None:
    """Apply :data:`CHECKBOX_QSS` to ``widget`` and its children."""
    widget.setStyleSheet(widget.styleSheet() + CHECKBOX_QSS)
