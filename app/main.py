"""Desktop entry point: ``quantdesk`` with no arguments runs :func:`main`."""

from __future__ import annotations

import logging
import signal
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from app.display_check import display_problem
from app.first_run_tour import maybe_show_tour
from app.main_window import MainWindow
from app.storage.app_settings import AppSettings
from app.theme import apply_theme


def create_app(argv: list[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    app = QApplication(argv if argv is not None else sys.argv)
    app.setApplicationName("QuantDesk")
    app.setOrganizationName("QuantDesk")
    apply_theme(app)
    return app


def main() -> int:
    """Open the main window and run the event loop; returns the exit code.

    Qt aborts the whole process when its platform plugin cannot load, with a message
    that names no fix, so the display is checked first and a problem is one line on
    stderr and exit code 1.
    """
    problem = display_problem()
    if problem is not None:
        sys.stderr.write(problem + "\n")
        return 1
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per stats poll otherwise
    app = create_app()
    window = MainWindow(AppSettings.load())
    # Ctrl+C / SIGTERM close the window properly, so the server child is stopped too;
    # the timer gives Python a chance to run its signal handlers during the Qt loop.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_args: window.close())
    wake = QTimer()
    wake.timeout.connect(lambda: None)
    wake.start(300)
    app.aboutToQuit.connect(window.context.shutdown)
    window.show()
    maybe_show_tour(window, window.settings, window.show_page, window.save_settings)
    return int(app.exec())


if __name__ == "__main__":
    sys.exit(main())
