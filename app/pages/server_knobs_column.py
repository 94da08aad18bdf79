"""The Server page's left column: the model, its knobs (the engine's, speculative decoding,
the network's, other machines'), and whether it fits; a scroll area, so a short window
scrolls the column instead of squeezing it.

The column is where the knobs meet the settings: a change writes what the widgets show to
``AppSettings.server``, and picking a model shows the knobs remembered for it
(``ModelSettingsStore``)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGroupBox, QScrollArea, QVBoxLayout, QWidget

from app.page_models.router_models import library_model_id, with_model_overrides
from app.pages.server_engine_box import EngineBox
from app.pages.server_fit_box import FitBox
from app.pages.server_model_picker import ModelPicker
from app.pages.server_network_box import NetworkBox
from app.pages.server_rpc_tabs import RpcTabs
from app.pages.server_speculative_box import SpeculativeBox
from app.storage.app_settings import AppSettings, ServerKnobs
from app.workers.share_process import ShareSupervisor
from backend.settings.model_settings_store import ModelSettingsStore


class KnobsColumn(QScrollArea):
    """``changed()`` once the settings hold a knob the user changed (never while
    :meth:`load` shows knobs)."""

    changed = Signal()

    def __init__(
        self, settings: AppSettings, share: ShareSupervisor, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self._loading = True
        self._chosen_id: tuple[str, str | None] = ("", None)  # (picker value, library id)
        self.model_picker = ModelPicker(settings)
        self.model_picker.model_changed.connect(self._on_model_changed)
        model_box = QGroupBox("Model")
        QVBoxLayout(model_box).addWidget(self.model_picker)
        self.engine = EngineBox()
        self.model_picker.layers_read.connect(self.engine.ngl_spin.setMaximum)
        self.speculative = SpeculativeBox(settings)
        self.model_picker.library_read.connect(self.speculative.draft_picker.set_library)
        self.fit_box = FitBox()
        self.network = NetworkBox()
        self.rpc_tabs = RpcTabs(share, settings.share)
        for box in (self.engine, self.speculative, self.network):
            box.changed.connect(self._on_knob_changed)
        self.rpc_tabs.workers_box.workers_changed.connect(self._on_knob_changed)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 6, 0)
        lv.setSpacing(12)
        for view in (
            model_box,
            self.engine,
            self.speculative,
            self.fit_box,
            self.network,
            self.rpc_tabs,
        ):
            lv.addWidget(view)
        lv.addStretch(1)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidget(left)
        self.setMinimumWidth(540)
        self.load(settings.server)
        self._loading = False

    def load(self, k: ServerKnobs) -> None:
        """Show ``k`` (the settings are not written)."""
        loading, self._loading = self._loading, True
        self.model_picker.select(k.model)
        self.engine.load(k)
        self.speculative.load(k)
        self.network.load(k)
        self.rpc_tabs.load(k)
        self._loading = loading

    def show_port(self, port: int) -> None:
        """Show ``port``, which the settings already hold."""
        loading, self._loading = self._loading, True
        self.network.port_spin.setValue(port)
        self._loading = loading

    def knobs(self) -> ServerKnobs:
        """The knobs as the widgets show them; knobs the page does not show keep their
        saved values."""
        saved = self.settings.server
        shown = (
            {"model": self.model_picker.value()}
            | self.engine.values()
            | self.network.values()
            | self.rpc_tabs.values()
            | self.speculative.values(saved)
        )
        return saved.model_copy(update=shown)

    def chosen_library_id(self) -> str | None:
        """The library id of the model chosen (``None``: a file outside the library)."""
        value = self.model_picker.value()
        if self._chosen_id[0] != value:  # read the library's folder once per choice
            self._chosen_id = (value, library_model_id(value))
        return self._chosen_id[1]

    def _on_model_changed(self) -> None:
        """Another model was picked: show the knobs remembered for it, if any."""
        if self._loading:
            return
        model_id = library_model_id(self.model_picker.value())
        stored = ModelSettingsStore().get(model_id) if model_id is not None else {}
        if stored:
            self.load(with_model_overrides(self.knobs(), stored))
        self._on_knob_changed()

    def _on_knob_changed(self) -> None:
        if self._loading:
            return
        self.settings.server = self.knobs()
        self.speculative.remember_draft()
        self.changed.emit()

    def shutdown(self) -> None:
        self.model_picker.shutdown()
        self.rpc_tabs.workers_box.shutdown()
