"""The main window: a sidebar of pages, a page stack and a server status footer."""

from __future__ import annotations

import logging

from PySide6.QtCore import QByteArray, QEvent, QObject, QSize, Qt, QTimer, SignalInstance
from PySide6.QtGui import QCloseEvent, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QStackedWidget,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from app.app_context import AppContext
from app.page_models.server_errors import failure_title
from app.pages import PAGES, build_page
from app.storage.app_settings import AppSettings
from app.theme import icon
from app.widgets.common import StatusLight
from backend.settings.default_model import DEFAULT_MODEL_ID

log = logging.getLogger(__name__)

MINIMUM_SIZE = (1024, 600)


class PageStack(QStackedWidget):
    """The page stack; its minimum size is the current page's, not the largest page's."""

    def minimumSizeHint(self) -> QSize:
        page = self.currentWidget()
        if page is None:
            return QSize(0, 0)
        return page.minimumSizeHint().expandedTo(page.minimumSize())


class PageHolder(QScrollArea):
    """A frameless scroll area around the page stack that never squeezes a page.

    Below a page's minimum size a layout overlaps its widgets and cuts their text;
    this holder scrolls instead. Qt's own resizable scroll area would lay a page with
    word-wrapped text out at its preferred height and scroll where the page fits, so
    the holder gives the page the whole viewport, and scroll bars only when the window
    is smaller than the page's minimum. Pages scroll their own long columns, so from
    1280x720 up no page shows a scroll bar here.
    """

    def __init__(self, stack: PageStack, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PageHolder")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setWidget(stack)
        stack.installEventFilter(self)
        stack.currentChanged.connect(lambda _i: self.fit_page())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.fit_page()
        return super().eventFilter(watched, event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_page()

    def fit_page(self) -> None:
        stack = self.widget()
        if stack is None:
            return
        need = stack.minimumSizeHint()
        room = self.maximumViewportSize()
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        width, height = room.width(), room.height()
        for _ in range(2):  # a bar in one direction takes room from the other
            if need.height() > height:
                width = room.width() - bar
            if need.width() > width:
                height = room.height() - bar
        size = QSize(max(width, need.width()), max(height, need.height()))
        if stack.size() != size:
            stack.resize(size)


class MainWindow(QMainWindow):
    """Sidebar navigation over the registered pages; owns the server via :class:`AppContext`."""

    def __init__(self, settings: AppSettings, context: AppContext | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.context = context or AppContext(settings, parent=self)
        self.context.save_settings = self.save_settings
        self.setWindowTitle("QuantDesk")
        self.setWindowIcon(icon("quantdesk"))
        # small enough for a maximised window on a 1280x720 screen (or 1920x1080 at 150%)
        # with a title bar and a panel; a page that needs more scrolls rather than squeezes
        self.setMinimumSize(*MINIMUM_SIZE)
        self.confirm_close = True  # tests switch the in-flight question off
        self._pages: dict[str, QWidget] = {}

        root = QWidget()
        layout = QHBoxLayout(root)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._build_sidebar())
        self.stack = PageStack()
        self.page_holder = PageHolder(self.stack)
        layout.addWidget(self.page_holder, 1)
        self.setCentralWidget(root)

        for spec in PAGES:
            page = build_page(spec, settings, self.context)
            page.setObjectName(f"page_{spec.key}")
            self._pages[spec.key] = page
            self.stack.addWidget(page)
            item = QListWidgetItem(icon(spec.icon), spec.title)
            item.setData(Qt.ItemDataRole.UserRole, spec.key)
            item.setSizeHint(QSize(180, 40))
            self.sidebar.addItem(item)
            serve = getattr(page, "serve_requested", None)  # e.g. "Serve" on the Models page
            if isinstance(serve, SignalInstance):
                serve.connect(self.serve_model)
            load = getattr(page, "load_requested", None)  # "Load" on the Models page
            if isinstance(load, SignalInstance):
                load.connect(self.load_model)
        self.sidebar.currentRowChanged.connect(self._on_row)
        self.context.navigate_requested.connect(self.show_page)
        server = self.context.server
        server.state_changed.connect(self._on_server_state)
        server.server_started.connect(lambda url: self._on_server_state("running"))

        geometry = settings.window.geometry_hex
        if geometry:
            self.restoreGeometry(QByteArray.fromHex(geometry.encode()))
        else:
            self.resize(1440, 900)
        self.show_page(
            settings.window.last_page if settings.window.last_page in self._pages else "chat"
        )
        self._on_server_state(server.state.value)
        if settings.autostart_server:
            QTimer.singleShot(0, self.context.autostart_server)

    # -- layout ---------------------------------------------------------------------------
    def _build_sidebar(self) -> QWidget:
        column = QWidget()
        column.setObjectName("SidebarColumn")
        column.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        column.setFixedWidth(200)
        v = QVBoxLayout(column)
        v.setContentsMargins(0, 0, 0, 0)
        v.setSpacing(0)
        brand = QLabel("QuantDesk")
        brand.setObjectName("Brand")
        sub = QLabel("local LLM workstation")
        sub.setObjectName("BrandSub")
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("Sidebar")
        self.sidebar.setIconSize(QSize(20, 20))
        self.sidebar.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        footer = QWidget()
        footer.setObjectName("SidebarFooter")
        footer.setCursor(Qt.CursorShape.PointingHandCursor)
        footer.setToolTip("Open the Server page")
        footer.mousePressEvent = lambda _e: self.show_page("server")  # type: ignore[method-assign]
        h = QHBoxLayout(footer)
        h.setContentsMargins(14, 10, 10, 12)
        self.footer_light = StatusLight()
        self.footer_text = QLabel("Server stopped")
        self.footer_text.setObjectName("SidebarFooterText")
        self.footer_text.setWordWrap(True)
        h.addWidget(self.footer_light)
        h.addWidget(self.footer_text, 1)
        v.addWidget(brand)
        v.addWidget(sub)
        v.addWidget(self.sidebar, 1)
        v.addWidget(footer)
        return column

    # -- navigation -----------------------------------------------------------------------
    def page(self, key: str) -> QWidget:
        return self._pages[key]

    def page_keys(self) -> list[str]:
        return list(self._pages)

    def show_page(self, key: str) -> None:
        keys = self.page_keys()
        if key in keys:
            self.sidebar.setCurrentRow(keys.index(key))

    def serve_model(self, path: str) -> None:
        """Select ``path`` on the Server page and show it (any page may ask for this)."""
        page = self._pages.get("server")
        set_model = getattr(page, "set_model", None)
        if callable(set_model):
            set_model(path)
            self.show_page("server")

    def load_model(self, value: str) -> None:
        """Load a library model ('default' or a path) in the running server, beside the
        others, or start the server with it; the asking page says how it went."""
        server_page = self._pages.get("server")
        start = getattr(server_page, "start_server", None)
        if not self.context.server.is_active() and callable(start):
            self.serve_model(value)  # the Server page shows it chosen, with its knobs
            start()
            problem = None
        else:
            problem = self.context.load_path(value)
        name = DEFAULT_MODEL_ID if value == "default" else value.rsplit("/", 1)[-1]
        page = self._pages.get("models")
        show = getattr(page, "show_load_result", None)
        if callable(show):
            show(name, problem)

    def _on_row(self, row: int) -> None:
        if row < 0:
            return
        key = self.page_keys()[row]
        self.stack.setCurrentWidget(self._pages[key])
        self.settings.window.last_page = key

    def _on_server_state(self, state: str) -> None:
        self.footer_light.set_state(state)
        server = self.context.server
        text = {
            "running": f"Serving on port {server.port}",
            "starting": "Server starting…",
            "stopping": "Server stopping…",
            "crashed": failure_title(server.last_error, footer=True),
            "stopped": "Server stopped",
        }.get(state, state)
        self.footer_text.setText(text)

    # -- shutdown -------------------------------------------------------------------------
    def save_settings(self) -> None:
        self.settings.window.geometry_hex = bytes(self.saveGeometry().toHex().data()).decode()
        try:
            self.settings.save()
        except OSError as exc:
            log.warning("could not save settings: %s", exc)

    def closeEvent(self, event: QCloseEvent) -> None:
        server = self.context.server
        if self.confirm_close and server.is_active():
            busy = server.requests_in_flight()
            checks = [getattr(p, "is_streaming", None) for p in self._pages.values()]
            if any(callable(c) and c() for c in checks):  # our own reply is in flight for sure
                busy = max(busy, 1)
            if busy > 0:
                answer = QMessageBox.question(
                    self,
                    "Requests in flight",
                    f"The server is answering {busy} request(s). Quit and stop it anyway?",
                    QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                    QMessageBox.StandardButton.No,
                )
                if answer != QMessageBox.StandardButton.Yes:
                    event.ignore()
                    return
        self.save_settings()
        for page in self._pages.values():
            shutdown = getattr(page, "shutdown", None)
            if callable(shutdown):
                shutdown()
        self.context.shutdown()
        event.accept()
