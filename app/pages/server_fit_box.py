"""The Server page's "Will it fit?" box: the fit bars for the knobs shown, and while a library
server holds models, each of them a segment of the bars before the chosen model
(:mod:`app.page_models.memory_stack`)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QGroupBox, QVBoxLayout, QWidget

from app.page_models.fit_adapter import FitView
from app.page_models.memory_stack import estimated_gpu_bytes, load_plan, memory_stacks
from app.page_models.router_models import ModelCard
from app.storage.app_settings import ServerKnobs
from app.widgets.fit_bar import FitBar
from backend.settings.model_settings_store import ModelSettingsStore
from backend.settings.router_settings import RouterSettings


class FitBox(QGroupBox):
    """The :class:`FitBar` (``fit_bar``) in its box."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Will it fit?", parent)
        v = QVBoxLayout(self)
        self.fit_bar = FitBar()
        v.addWidget(self.fit_bar)
        # each resident model's GPU share by estimate, once per load of it
        self._gpu_shares: dict[tuple[str, int | None], int] = {}
        self._router = RouterSettings()  # the server's reserve and models_max (same env)

    def show_fit(
        self,
        view: FitView,
        cards: list[ModelCard],
        chosen_id: Callable[[], str | None],
        running: ServerKnobs,
    ) -> None:
        """Show ``view``; with ``cards`` (a running library server's models) holding models,
        each one is a segment of the bars, then the chosen model if it is not among them.
        ``running`` are the served knobs a resident model's GPU share is estimated with."""
        self.fit_bar.set_view(view)
        if not any(c.state in ("loaded", "loading") for c in cards):
            return

        def gpu_share(card: ModelCard) -> int:
            key = (card.id, card.memory_bytes)
            if key not in self._gpu_shares:
                stored = ModelSettingsStore().get(card.id)
                self._gpu_shares[key] = estimated_gpu_bytes(card.id, running, stored)
            return self._gpu_shares[key]

        gpu_of = gpu_share if view.vram_total > 0 else None
        ram, vram = memory_stacks(view, cards, chosen_id(), self._router.memory_reserve, gpu_of)
        plan = load_plan(ram, vram, cards, self._router.models_max)
        self.fit_bar.set_stacks(ram, vram, plan)
