"""The Server page's "Resident models" tab: the models a library server holds (state,
memory, idle time, requests in flight, pinned) with Load, Unload and Pin.

It shows what the shared poller read from ``GET /v1/models`` and asks the context for the
actions, which run off the GUI thread; their errors are said in the box."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.page_models.router_models import (
    RESIDENT_COLUMNS,
    ModelCard,
    resident_cells,
    resident_rows,
)
from app.widgets.common import list_table, table_item

NOT_RUNNING = "Start the server to see the models it holds."
SINGLE_FILE = (
    "This server serves one file from outside the library alone. Choose a library model "
    "to serve several at once."
)
HINT = (
    "Load adds the model chosen above (or reloads the selected row); clients load any "
    "library model on demand by naming it."
)


class ResidentModelsBox(QWidget):
    """The table and its buttons. ``load_requested(id or '')``: '' means the page's chosen
    model; ``unload_requested(id)``; ``pin_requested(id, pin)``."""

    load_requested = Signal(str)
    unload_requested = Signal(str)
    pin_requested = Signal(str, bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cards: list[ModelCard] = []
        self.acted_on: set[str] = set()
        # model id -> the state shown until the request answers ('loading', 'unloading')
        self.pending: dict[str, str] = {}
        self._enabled = False
        self.serving: bool | None = None  # None: no server; False: one file; True: library
        v = QVBoxLayout(self)
        v.setContentsMargins(8, 8, 8, 8)
        self.table = list_table(RESIDENT_COLUMNS)
        self.table.setMinimumHeight(90)
        # a name's start and end (the model, its quantisation) say most when it is cut
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        row = QHBoxLayout()
        self.load_button = QPushButton("Load")
        self.load_button.setToolTip(HINT)
        self.unload_button = QPushButton("Unload")
        self.unload_button.setToolTip("Stop the selected model's server; its memory comes back")
        self.pin_button = QPushButton("Pin")
        self.pin_button.setToolTip(
            "A pinned model is never unloaded to make room for another, nor when idle"
        )
        self.load_button.clicked.connect(self._on_load)
        self.unload_button.clicked.connect(self._on_unload)
        self.pin_button.clicked.connect(self._on_pin)
        self.message = QLabel(NOT_RUNNING)
        self.message.setProperty("muted", True)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for button in (self.load_button, self.unload_button, self.pin_button):
            row.addWidget(button)
        row.addStretch(1)
        v.addWidget(self.table, 1)
        v.addLayout(row)
        v.addWidget(self.message)
        self._update_buttons()

    # -- what the page tells it -----------------------------------------------------------
    def set_serving(self, serving_library: bool | None) -> None:
        """``None``: no server; ``False``: a single file alone; ``True``: the library."""
        self.serving = serving_library
        self._enabled = bool(serving_library)
        if serving_library is None:
            self.show_cards([])
            self.acted_on.clear()
            self.pending.clear()
            self.message.setText(NOT_RUNNING)
        elif not serving_library:
            self.show_cards([])
            self.message.setText(SINGLE_FILE)
        else:
            self.message.setText(HINT)
        self._update_buttons()

    def show_cards(self, cards: list[ModelCard]) -> None:
        """Fill the table from the polled cards, keeping the selected row."""
        self.cards = cards
        selected = self.selected_id()
        rows = resident_rows(cards, self.acted_on)
        table = self.table
        table.setRowCount(len(rows))
        for r, card in enumerate(rows):
            cells = resident_cells(card)
            if card.id in self.pending and card.state != "failed":
                cells[1] = self.pending[card.id]
            tip = f"{card.id}: {card.error}" if card.error else card.id
            for c, text in enumerate(cells):
                item = table_item(text, tip if c in (0, 1) else "")
                item.setData(Qt.ItemDataRole.UserRole, card.id)
                table.setItem(r, c, item)
            if card.id == selected:
                table.selectRow(r)
        self._update_buttons()

    def action_done(self, model_id: str, what: str) -> None:
        self.pending.pop(model_id, None)
        self.message.setText(f"{model_id}: {what}.")

    def action_failed(self, model_id: str, message: str) -> None:
        self.pending.pop(model_id, None)
        self.message.setText(f"{model_id}: {message}")

    def mark(self, model_id: str, state: str) -> None:
        """Show ``state`` for ``model_id`` until its request answers (a row is added for a
        model the poll has not listed yet)."""
        self.acted_on.add(model_id)
        self.pending[model_id] = state
        if all(c.id != model_id for c in self.cards):
            self.cards = [*self.cards, ModelCard(model_id, state)]
        self.show_cards(self.cards)

    # -- the selection ----------------------------------------------------------------------
    def selected_id(self) -> str | None:
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        item = self.table.item(rows[0].row(), 0)
        value = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return str(value) if value else None

    def select(self, model_id: str) -> bool:
        for r in range(self.table.rowCount()):
            item = self.table.item(r, 0)
            if item is not None and item.data(Qt.ItemDataRole.UserRole) == model_id:
                self.table.selectRow(r)
                return True
        return False

    def selected_card(self) -> ModelCard | None:
        chosen = self.selected_id()
        return next((c for c in self.cards if c.id == chosen), None)

    def _update_buttons(self) -> None:
        card = self.selected_card()
        resident = card is not None and card.state in ("loaded", "loading")
        self.load_button.setEnabled(self._enabled)
        self.unload_button.setEnabled(self._enabled and resident)
        self.pin_button.setEnabled(self._enabled and card is not None and card.state == "loaded")
        self.pin_button.setText("Unpin" if card is not None and card.pinned else "Pin")

    def _on_load(self) -> None:
        card = self.selected_card()
        reload = card is not None and card.state in ("failed", "unloaded")
        self.load_requested.emit(card.id if reload and card is not None else "")

    def _on_unload(self) -> None:
        chosen = self.selected_id()
        if chosen:
            self.unload_requested.emit(chosen)

    def _on_pin(self) -> None:
        card = self.selected_card()
        if card is not None:
            self.pin_requested.emit(card.id, not card.pinned)
