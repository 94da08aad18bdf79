"""The Server page's Speculative decoding box: off, n-gram lookup or a draft model (with its
picker and draft length), as LM Studio offers it; the knobs each choice sets are
:mod:`app.page_models.speculative_choice`'s."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QGridLayout, QLabel, QWidget

from app.page_models.speculative_choice import (
    DRAFT_MODEL_TIP,
    DRAFT_TOKENS_TIP,
    SPEC_CHOICES,
    SpecMode,
    spec_mode,
    spec_update,
)
from app.pages.server_knob_widgets import KnobBox, knob_spin
from app.pages.server_model_picker import ModelPicker
from app.storage.app_settings import AppSettings, ServerKnobs


class SpeculativeBox(KnobBox):
    """The choice, and for a draft model its length and picker (which lists what the
    Model box's scan found: feed it :meth:`ModelPicker.set_library`)."""

    def __init__(self, settings: AppSettings, parent: QWidget | None = None) -> None:
        super().__init__("Speculative decoding", parent)
        self.settings = settings
        grid = self._grid = QGridLayout(self)
        grid.setHorizontalSpacing(10)  # four columns in the left column's 540 px
        grid.setVerticalSpacing(8)
        self.spec_combo = QComboBox()
        for i, choice in enumerate(SPEC_CHOICES):
            self.spec_combo.addItem(choice.label, choice.mode)
            self.spec_combo.setItemData(i, choice.tooltip, Qt.ItemDataRole.ToolTipRole)
        self.draft_spin = knob_spin("draft_max")
        self.draft_spin.setToolTip(DRAFT_TOKENS_TIP)
        self.draft_picker = ModelPicker(settings, open_text="Open…")
        self.draft_picker.combo.setToolTip(DRAFT_MODEL_TIP)
        self.draft_tokens_label = QLabel("Draft tokens")
        self.draft_model_label = QLabel("Draft model")
        # level with the picker's list, not with the middle of list and facts
        self.draft_model_label.setMinimumHeight(self.draft_picker.combo.sizeHint().height())
        grid.addWidget(QLabel("Method"), 0, 0)
        grid.addWidget(self.spec_combo, 0, 1)
        grid.addWidget(self.draft_tokens_label, 0, 2)
        grid.addWidget(self.draft_spin, 0, 3)
        grid.addWidget(self.draft_model_label, 1, 0, Qt.AlignmentFlag.AlignTop)
        grid.addWidget(self.draft_picker, 1, 1, 1, 3)
        grid.setColumnStretch(1, 1)
        self.spec_combo.currentIndexChanged.connect(self._on_spec_mode)
        self.watch(self.draft_spin)
        self.draft_picker.model_changed.connect(self.changed)

    def spec_mode(self) -> SpecMode:
        """The speculative-decoding choice shown: 'off', 'ngram' or 'draft'."""
        mode: SpecMode = self.spec_combo.currentData()
        return mode

    def set_spec_mode(self, mode: SpecMode) -> None:
        self.spec_combo.setCurrentIndex(self.spec_combo.findData(mode))

    def show_spec_mode(self) -> None:
        """The draft model's row and length only for a draft model; the tooltip says what
        the shown choice does."""
        index = self.spec_combo.currentIndex()
        self.spec_combo.setToolTip(SPEC_CHOICES[index].tooltip if index >= 0 else "")
        drafting = self.spec_mode() == "draft"
        # the choice spans the row the draft length leaves empty
        self._grid.removeWidget(self.spec_combo)
        self._grid.addWidget(self.spec_combo, 0, 1, 1, 1 if drafting else 3)
        for widget in (
            self.draft_tokens_label,
            self.draft_spin,
            self.draft_model_label,
            self.draft_picker,
        ):
            widget.setVisible(drafting)

    def _on_spec_mode(self) -> None:
        self.show_spec_mode()
        self.changed.emit()

    def load(self, k: ServerKnobs) -> None:
        self.draft_picker.select(k.model_draft or self._remembered_draft())
        self.draft_spin.setValue(k.draft_max)
        self.set_spec_mode(spec_mode(k))
        self.show_spec_mode()

    def values(self, saved: ServerKnobs) -> dict[str, Any]:
        """The knobs as the box shows them; ``saved`` keeps a hand-written type list."""
        return {"draft_max": self.draft_spin.value()} | spec_update(
            saved, self.spec_mode(), self.draft_picker.value()
        )

    def _remembered_draft(self) -> str:
        """The draft model picked last, kept while speculative decoding is off (the knobs
        then name none, since a draft model alone turns it on)."""
        value = self.settings.pages.get("server", {}).get("draft_model")
        return value if isinstance(value, str) and value else "default"

    def remember_draft(self) -> None:
        self.settings.pages.setdefault("server", {})["draft_model"] = self.draft_picker.value()
