"""The Server page's "Other machines" tabs (llama.cpp RPC): the workers the model is split
across, and sharing this machine as one; two tabs, so the column grows by one of them."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QTabWidget, QWidget

from app.page_models.rpc_workers import join_workers, parse_workers
from app.pages.server_knob_widgets import knob_choices
from app.pages.server_workers_view import WORKERS_TIP, ShareBox, WorkersBox
from app.storage.app_settings import ServerKnobs, ShareSettings
from app.workers.share_process import ShareSupervisor


class RpcTabs(QTabWidget):
    """The Workers tab (``workers_box``) and the Share tab (``share_box``), each titled
    with what it holds: the number of workers, whether this machine is shared."""

    def __init__(
        self, share: ShareSupervisor, settings: ShareSettings, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.share = share
        self.workers_box = WorkersBox(knob_choices("split_mode"))
        self.workers_box.workers_changed.connect(self.show_titles)
        self.share_box = ShareBox(share, settings)
        share.state_changed.connect(self.show_titles)
        for box in (self.workers_box, self.share_box):
            box.setTitle("")
            box.setFlat(True)
        self.addTab(self.workers_box, "")
        self.addTab(self.share_box, "")
        self.show_titles()

    def show_titles(self) -> None:
        count = len(self.workers_box.workers())
        self.setTabText(0, f"Workers ({count})" if count else "Workers")
        self.setTabToolTip(0, WORKERS_TIP)
        sharing = self.share.is_active()
        self.setTabText(1, "Share this machine: on" if sharing else "Share this machine")

    def load(self, k: ServerKnobs) -> None:
        self.workers_box.set_workers(parse_workers(k.rpc))
        self.workers_box.set_split(k.tensor_split, k.split_mode)
        self.show_titles()

    def values(self) -> dict[str, Any]:
        """The RPC knobs as the Workers tab shows them."""
        return {
            "rpc": join_workers(self.workers_box.workers()),
            "tensor_split": self.workers_box.tensor_split(),
            "split_mode": self.workers_box.split_mode_combo.currentText(),
        }
