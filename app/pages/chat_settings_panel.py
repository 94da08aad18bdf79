"""The Chat page's settings: the system prompt and the sampling settings a reply is asked
with (:class:`ChatDefaults`)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.storage.app_settings import ChatDefaults


def _dspin(lo: float, hi: float, step: float, decimals: int = 2) -> QDoubleSpinBox:
    box = QDoubleSpinBox()
    box.setRange(lo, hi)
    box.setSingleStep(step)
    box.setDecimals(decimals)
    return box


class ChatSettingsPanel(QWidget):
    """The "System prompt" and "Sampling" boxes; ``changed()`` when the user edits one."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        sys_box = QGroupBox("System prompt")
        sv = QVBoxLayout(sys_box)
        self.system_edit = QPlainTextEdit()
        self.system_edit.setMinimumHeight(110)
        sv.addWidget(self.system_edit)
        samp = QGroupBox("Sampling")
        form = QFormLayout(samp)
        self.temp_spin = _dspin(0.0, 2.0, 0.05)
        self.top_p_spin = _dspin(0.01, 1.0, 0.01)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(0, 1000)
        self.top_k_spin.setSpecialValueText("off")
        self.min_p_spin = _dspin(0.0, 1.0, 0.01)
        self.repeat_spin = _dspin(0.0, 10.0, 0.05)
        self.max_tokens_spin = QSpinBox()
        self.max_tokens_spin.setRange(1, 1_048_576)
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(-1, 2**31 - 1)
        self.seed_spin.setSpecialValueText("random")
        self._spins: dict[str, QSpinBox | QDoubleSpinBox] = {
            "temperature": self.temp_spin,
            "top_p": self.top_p_spin,
            "top_k": self.top_k_spin,
            "min_p": self.min_p_spin,
            "repeat_penalty": self.repeat_spin,
            "max_tokens": self.max_tokens_spin,
            "seed": self.seed_spin,
        }
        for label, spin in zip(
            ("Temperature", "Top P", "Top K", "Min P", "Repeat penalty", "Max tokens", "Seed"),
            self._spins.values(),
            strict=True,
        ):
            form.addRow(label, spin)
        v.addWidget(sys_box)
        v.addWidget(samp)
        self.system_edit.textChanged.connect(self.changed)
        for spin in self._spins.values():
            spin.valueChanged.connect(self.changed)

    def show_defaults(self, defaults: ChatDefaults) -> None:
        """Put a system prompt and sampling settings in the boxes."""
        self.system_edit.setPlainText(defaults.system_prompt)
        for name, spin in self._spins.items():
            spin.setValue(getattr(defaults, name))

    def save_to(self, defaults: ChatDefaults) -> None:
        """Write what the boxes show (rounded as they are) to ``defaults``."""
        defaults.system_prompt = self.system_edit.toPlainText()
        for name, spin in self._spins.items():
            setattr(defaults, name, spin.value())
