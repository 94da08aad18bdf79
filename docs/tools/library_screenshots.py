"""Screenshots of the serving pages while the window serves a library of several models.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.library_screenshots \
        --out /tmp/library-shots [--size 1280x720]

A temporary ``QUANTDESK_HOME`` holds a library of four models (the embedded one under other
names, one in nested folders so its id is long); the window serves the library, loads two
models beside the chosen one (one on demand from the chat), and grabs: the chat while a
model loads on demand and after its reply, the Server page with the resident models stacked
on the fit bars and another model chosen to load, and the dashboard for every model and for
one. Documentation tooling, run from the repository root; not part of the app.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

from docs.tools.serving_screenshots import open_window, parse_size, wait_until

log = logging.getLogger(__name__)

LONG_ID = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF/smollm2-135m-instruct-q4_1"
LIBRARY = (f"{LONG_ID}.gguf", "coder-autocomplete-q4_1.gguf", "embed-small.gguf")


def make_library(home: Path) -> None:
    """The embedded model under the library's other names (links, not copies)."""
    from backend.settings.default_model import default_model_path

    source = default_model_path()
    for name in LIBRARY:
        path = home / "models" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(source)


def take(out: Path, size: tuple[int, int]) -> list[Path]:
    home = Path(tempfile.mkdtemp(prefix="quantdesk-library-shots-"))
    os.environ["QUANTDESK_HOME"] = str(home)
    os.environ["HF_HOME"] = str(home / "hf")
    make_library(home)
    window = open_window(size, ctx_size=2048, parallel=2, port=0)
    from app.pages.chat_page import ChatPage
    from app.pages.dashboard_page import DashboardPage
    from app.pages.server_page import ServerPage
    from app.workers.server_process import ServerState
    from backend.settings.default_model import DEFAULT_MODEL_ID

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    context = window.context

    def grab(key: str, name: str) -> None:
        window.show_page(key)
        wait_until(lambda: False, 1.2)  # a poll of the models, a redraw of the charts
        path = out / f"{name}.png"
        window.grab().save(str(path))
        shots.append(path)
        log.info("saved %s", path)

    context.poll_interval_s = 0.2
    context.start_server()
    if not wait_until(lambda: context.server.state is ServerState.RUNNING, 180):
        raise SystemExit(f"server did not start: {context.server.last_error}")
    wait_until(lambda: context.model_state(DEFAULT_MODEL_ID) == "loaded", 120)
    context.load_model(LONG_ID)
    wait_until(lambda: context.model_state(LONG_ID) == "loaded", 180)

    chat = window.page("chat")
    assert isinstance(chat, ChatPage)
    window.show_page("chat")
    wait_until(lambda: chat.model_combo.findData("coder-autocomplete-q4_1") >= 0, 30)
    chat.choose_model("coder-autocomplete-q4_1")
    chat.temp_spin.setValue(0.2)
    chat.max_tokens_spin.setValue(80)
    chat.composer.setPlainText("Write a Python function that reverses a string.")
    chat.send()
    grab("chat", "chat-loading")
    wait_until(lambda: not chat.is_streaming(), 180)
    grab("chat", "chat")

    server = window.page("server")
    assert isinstance(server, ServerPage)
    server.set_model(str(home / "models" / "embed-small.gguf"))
    server.activity_tabs.setCurrentWidget(server.resident)
    server.resident.select(LONG_ID)
    grab("server", "server")

    dash = window.page("dashboard")
    assert isinstance(dash, DashboardPage)
    window.show_page("dashboard")
    wait_until(lambda: dash.filter_model(None), 10)
    grab("dashboard", "dashboard")
    wait_until(lambda: dash.filter_model("coder-autocomplete-q4_1"), 10)
    grab("dashboard", "dashboard-model")
    window.close()
    return shots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("/tmp/library-shots"))
    parser.add_argument(
        "--size", type=parse_size, default=(1440, 900), help="window size, e.g. 1280x720"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    take(args.out, args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
