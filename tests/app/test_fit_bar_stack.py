"""The fit bars draw a library server's resident models as segments of their own: each in
its own colour, in the order of the stack, the model about to load in the plan's colour,
named in the legend with the plan under it; a plain view clears the stack again."""

from __future__ import annotations

from PySide6.QtGui import QColor, QImage
from pytestqt.qtbot import QtBot

from app.page_models.fit_adapter import FitView
from app.page_models.memory_stack import MemoryStack, load_plan, memory_stacks
from app.page_models.router_models import ModelCard
from app.theme import GOOD, WARN
from app.widgets.fit_bar import RESIDENT_COLOURS, FitBar

MiB = 1 << 20
GiB = 1 << 30


def _colour_at(image: QImage, stack: MemoryStack, fraction: float) -> str:
    """The colour of the bar's top row at ``fraction`` of its width (above any label)."""
    x = min(image.width() - 1, int(image.width() * fraction))
    return QColor(image.pixel(x, 1)).name()


def test_resident_models_are_drawn_as_segments(qtbot: QtBot) -> None:
    bar = FitBar()
    qtbot.addWidget(bar)
    bar.resize(600, 160)
    bar.show()
    view = FitView("fits", "", 300 * MiB, 2 * GiB)
    bar.set_view(view)
    assert bar.stacks is None and not bar.legend.isVisible()
    cards = [
        ModelCard("org/coder", "loaded", memory_bytes=GiB, idle_s=100.0),
        ModelCard("embed", "loaded", memory_bytes=GiB // 2, idle_s=5.0),
    ]
    ram, vram = memory_stacks(view, cards, "chat", reserve_bytes=GiB // 2)
    plan = load_plan(ram, vram, cards, models_max=4)
    bar.set_stacks(ram, vram, plan)
    assert plan.kind == "fits"
    image = bar.ram_meter.grab().toImage()
    spans = {seg.model_id: (a, b) for a, b, seg in ram.spans()}
    middle = {k: (a + b) / 2 for k, (a, b) in spans.items()}
    assert _colour_at(image, ram, middle["org/coder"]) == RESIDENT_COLOURS[0]
    assert _colour_at(image, ram, middle["embed"]) == RESIDENT_COLOURS[1]
    assert _colour_at(image, ram, middle["chat"]) == QColor(GOOD).name()
    assert bar.ram_text.text() == "428.0 MiB of 2.0 GiB free"
    text = bar.legend.text()
    assert bar.legend.isVisible()
    assert text.index("coder") < text.index("embed") < text.index("chat&nbsp;(to&nbsp;load)")
    assert "Fits beside the 2 resident models." in text
    assert "org/coder: 1.0 GiB" in bar.ram_meter.toolTip()

    # no room beside them: the model to load turns amber and the plan says who goes
    tight = FitView("fits", "", 300 * MiB, 700 * MiB)
    bar.set_view(tight)
    ram, vram = memory_stacks(tight, cards, "chat", reserve_bytes=GiB // 2)
    plan = load_plan(ram, vram, cards, models_max=4)
    bar.set_stacks(ram, vram, plan)
    assert plan.kind == "evicts" and "unloads coder first" in bar.legend.text()
    assert bar.colours["chat"] == WARN

    bar.set_view(view)  # the server stopped: the plain bar again
    assert bar.stacks is None and not bar.legend.isVisible()
    assert bar.ram_meter.stack is None and bar.ram_text.text() == "300.0 MiB of 2.0 GiB free"
