"""The Server page's knob widgets: spin boxes and lists whose ranges, choices, defaults and
tooltips are the knob's own in :class:`ServerKnobs`, so the page offers no value ``serve``
refuses."""

from __future__ import annotations

from typing import get_args

from annotated_types import Ge, Le
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QGroupBox,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from app.storage.app_settings import ServerKnobs

AUTO = -1  # a budget spin box's "auto" (the knob's None: sized by the server)


def knob_bounds(name: str) -> tuple[int, int]:
    """The ``ge``/``le`` bounds :class:`ServerKnobs` declares for an integer knob."""
    lo = hi = None
    for bound in ServerKnobs.model_fields[name].metadata:
        if isinstance(bound, Ge) and isinstance(bound.ge, int):
            lo = bound.ge
        elif isinstance(bound, Le) and isinstance(bound.le, int):
            hi = bound.le
    if lo is None or hi is None:
        raise ValueError(f"knob {name!r} declares no integer ge/le bounds")
    return lo, hi


def knob_choices(name: str) -> list[str]:
    """The values a Literal-typed knob of :class:`ServerKnobs` accepts, in declared order."""
    return [str(choice) for choice in get_args(ServerKnobs.model_fields[name].annotation)]


def knob_spin(name: str, step: int = 1, special: str | None = None) -> QSpinBox:
    """A spin box whose range, default and tooltip are the knob's own in :class:`ServerKnobs`."""
    field = ServerKnobs.model_fields[name]
    box = QSpinBox()
    box.setRange(*knob_bounds(name))
    box.setSingleStep(step)
    box.setValue(field.get_default(call_default_factory=True))
    box.setAccelerated(True)
    box.setToolTip(field.description or "")
    if special:
        box.setSpecialValueText(special)
    return box


def budget_spin(name: str) -> QSpinBox:
    """A MiB budget whose None is "auto" (shown below 0) and 0 is off."""
    box = QSpinBox()
    box.setRange(AUTO, min(knob_bounds(name)[1], 99_999))  # a narrow box; serve takes more
    box.setSingleStep(512)
    box.setSpecialValueText("auto")
    box.setValue(AUTO)
    box.setAccelerated(True)
    box.setToolTip(ServerKnobs.model_fields[name].description or "")
    return box


def budget_value(box: QSpinBox) -> int | None:
    """A budget spin box's knob value: ``None`` for "auto"."""
    return None if box.value() == AUTO else box.value()


def show_budget(box: QSpinBox, value: int | None) -> None:
    """Show a budget knob's value (``None`` as "auto")."""
    box.setValue(AUTO if value is None else value)


def knob_combo(name: str) -> QComboBox:
    """A list of the values a Literal-typed knob accepts, with the knob's tooltip."""
    combo = QComboBox()
    combo.addItems(knob_choices(name))
    combo.setToolTip(ServerKnobs.model_fields[name].description or "")
    return combo


class KnobBox(QGroupBox):
    """A box of knob widgets: ``changed()`` when one of those given to :meth:`watch` changes."""

    changed = Signal()

    def watch(self, *widgets: QWidget) -> None:
        for widget in widgets:
            if isinstance(widget, QSpinBox):
                widget.valueChanged.connect(self.changed)
            elif isinstance(widget, QComboBox):
                widget.currentIndexChanged.connect(self.changed)
            elif isinstance(widget, QLineEdit):
                widget.textChanged.connect(self.changed)
            elif isinstance(widget, QAbstractButton):
                widget.toggled.connect(self.changed)
            else:
                raise TypeError(f"no change signal known for {type(widget).__name__}")
