"""Screenshots of the serving pages, from the real window driving the real server.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.serving_screenshots \
        [--out docs/screenshots]
    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.serving_screenshots \
        --size 1280x720 --out docs/screenshots/1280x720

The window is 1440x900 unless ``--size`` says otherwise (1280x720 is a common laptop,
and what 1920x1080 at 150% scaling gives).

Starts the embedded model, chats once, lets the dashboard fill, runs a tiny bench
sweep, and grabs each page with ``QWidget.grab()``. Settings and chats go to a
temporary ``QUANTDESK_HOME`` so the user's own are untouched. Documentation tooling, run
from the repository root; not part of the app.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.main_window import MainWindow

log = logging.getLogger(__name__)


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    """Run the event loop until ``condition()`` holds (True) or ``timeout_s`` passes (False)."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        QApplication.processEvents()
        if condition():
            return True
        time.sleep(0.02)
    return False


SERVING_PAGES = ("chat", "server", "dashboard", "bench")


def parse_size(text: str) -> tuple[int, int]:
    """'1280x720' -> (1280, 720)."""
    width, _, height = text.lower().partition("x")
    return int(width), int(height)


def open_window(size: tuple[int, int], **server: object) -> MainWindow:
    """The app's window at ``size``, settings in a temporary ``QUANTDESK_HOME`` (server
    settings from ``server``), shown, with no autostart and no close question."""
    os.environ.setdefault("QUANTDESK_HOME", tempfile.mkdtemp(prefix="quantdesk-shots-"))
    from app.main import create_app
    from app.main_window import MainWindow
    from app.storage.app_settings import AppSettings

    create_app([sys.argv[0]])
    settings = AppSettings(autostart_server=False)
    settings.server = settings.server.model_copy(update=server)
    window = MainWindow(settings)
    window.confirm_close = False
    window.resize(*size)
    window.show()
    return window


def take(
    out: Path,
    bench: bool = True,
    pages: tuple[str, ...] = SERVING_PAGES,
    size: tuple[int, int] = (1440, 900),
) -> list[Path]:
    window = open_window(size, ctx_size=2048, parallel=4, port=0)
    from app.pages.bench_page import BenchPage
    from app.pages.chat_page import ChatPage
    from app.workers.server_process import ServerState

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []

    def grab(key: str) -> None:
        window.show_page(key)
        wait_until(lambda: False, 0.4)
        path = out / f"{key}.png"
        window.grab().save(str(path))
        shots.append(path)
        log.info("saved %s", path)

    server = window.context.server
    window.context.start_server()
    if not wait_until(lambda: server.state is ServerState.RUNNING, 180):
        raise SystemExit(f"server did not start: {server.last_error}")

    chat = window.page("chat")
    assert isinstance(chat, ChatPage)
    window.show_page("chat")
    chat.temp_spin.setValue(0.2)
    chat.max_tokens_spin.setValue(160)
    chat.composer.setPlainText(
        "Write a Python function that checks whether a number is prime, "
        "and explain it in two sentences."
    )
    chat.send()
    window.show_page("dashboard")
    wait_until(lambda: not chat.is_streaming(), 120)
    # a little concurrent load so the charts have shape
    for prompt in ("Name three planets.", "What is a GGUF file?"):
        chat.new_conversation()
        chat.composer.setPlainText(prompt)
        chat.max_tokens_spin.setValue(60)
        chat.send()
        wait_until(lambda: not chat.is_streaming(), 120)
    chat.open_conversation(chat.store.list()[-1].id)
    if bench:
        page = window.page("bench")
        assert isinstance(page, BenchPage)
        page.levels_edit.setText("1, 2, 4")
        page.reps_spin.setValue(1)
        page.rpc_spin.setValue(1)
        page.prompt_spin.setValue(32)
        page.max_tokens_spin.setValue(24)
        page.start()
        wait_until(lambda: page.worker is None, 300)
    for key in pages:
        grab(key)
    window.close()
    return shots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--no-bench", action="store_true")
    parser.add_argument(
        "--size",
        type=parse_size,
        default=(1440, 900),
        help="window size in logical pixels, e.g. 1280x720",
    )
    parser.add_argument(
        "--pages",
        default=",".join(SERVING_PAGES),
        help="comma-separated page keys (the Models, Quantise and Compare pages "
        "have their own script: docs/tools/page_screenshots.py)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    take(
        args.out,
        bench=not args.no_bench,
        pages=tuple(p for p in args.pages.split(",") if p),
        size=args.size,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
