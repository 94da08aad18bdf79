"""The Server page's Engine box: context, batches, GPU layers, threads, the KV cache's types
and layout, and the RAM and disk budgets for sessions kept past their slot."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QComboBox, QGridLayout, QLabel, QSpinBox, QWidget

from app.pages.server_knob_widgets import (
    KnobBox,
    budget_spin,
    budget_value,
    knob_combo,
    knob_spin,
    show_budget,
)
from app.storage.app_settings import ServerKnobs


class EngineBox(KnobBox):
    """Six rows of two knobs each; ``changed()`` when any of them changes."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Engine", parent)
        grid = QGridLayout(self)
        grid.setHorizontalSpacing(12)  # six rows of four: leaves room for the scroll bar
        grid.setVerticalSpacing(8)
        self.ctx_spin = knob_spin("ctx_size", 256)
        self.parallel_spin = knob_spin("parallel")
        self.batch_spin = knob_spin("batch_size", 32)
        self.ubatch_spin = knob_spin("ubatch_size", 16)
        self.ngl_spin = knob_spin("gpu_layers", special="all")
        self.threads_spin = knob_spin("threads")
        self.knob_spins: dict[str, QSpinBox] = {
            "ctx_size": self.ctx_spin,
            "parallel": self.parallel_spin,
            "batch_size": self.batch_spin,
            "ubatch_size": self.ubatch_spin,
            "gpu_layers": self.ngl_spin,
            "threads": self.threads_spin,
        }
        self.ctk_combo = knob_combo("cache_type_k")
        self.ctv_combo = knob_combo("cache_type_v")
        self.fa_combo = knob_combo("flash_attn")
        self.kv_layout_combo = QComboBox()
        self.kv_layout_combo.addItems(["unified", "per slot"])
        self.kv_layout_combo.setToolTip(
            "unified: one cache for all sequences, one request may use the whole context.\n"
            "per slot (default): each sequence gets context/parallel cells of its own "
            "(llama-server's layout with -np); faster, since a row attends only to its slot"
        )
        # sessions kept past their slot (issue 29): llama-server's --cache-ram, and on disk
        self.cache_ram_spin = budget_spin("cache_ram")
        self.cache_disk_spin = budget_spin("cache_disk")
        pairs = [
            ("Context length", self.ctx_spin, "Parallel sequences", self.parallel_spin),
            ("Batch size", self.batch_spin, "Micro-batch size", self.ubatch_spin),
            ("GPU layers", self.ngl_spin, "CPU threads", self.threads_spin),
            ("K cache type", self.ctk_combo, "V cache type", self.ctv_combo),
            ("Flash attention", self.fa_combo, "KV cache", self.kv_layout_combo),
            ("RAM cache MiB", self.cache_ram_spin, "Disk cache MiB", self.cache_disk_spin),
        ]
        for row, (l1, w1, l2, w2) in enumerate(pairs):
            grid.addWidget(QLabel(l1), row, 0)
            grid.addWidget(w1, row, 1)
            grid.addWidget(QLabel(l2), row, 2)
            grid.addWidget(w2, row, 3)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)
        self.watch(*self.knob_spins.values(), self.cache_ram_spin, self.cache_disk_spin)
        self.watch(self.ctk_combo, self.ctv_combo, self.fa_combo, self.kv_layout_combo)

    def load(self, k: ServerKnobs) -> None:
        for name, spin in self.knob_spins.items():
            spin.setValue(getattr(k, name))
        self.ctk_combo.setCurrentText(k.cache_type_k)
        self.ctv_combo.setCurrentText(k.cache_type_v)
        self.fa_combo.setCurrentText(k.flash_attn)
        self.kv_layout_combo.setCurrentIndex(0 if k.kv_unified else 1)
        show_budget(self.cache_ram_spin, k.cache_ram)
        show_budget(self.cache_disk_spin, k.cache_disk)

    def values(self) -> dict[str, Any]:
        """The knobs as the box shows them."""
        return {name: spin.value() for name, spin in self.knob_spins.items()} | {
            "cache_type_k": self.ctk_combo.currentText(),
            "cache_type_v": self.ctv_combo.currentText(),
            "flash_attn": self.fa_combo.currentText(),
            "kv_unified": self.kv_layout_combo.currentIndex() == 0,
            "cache_ram": budget_value(self.cache_ram_spin),
            "cache_disk": budget_value(self.cache_disk_spin),
        }
