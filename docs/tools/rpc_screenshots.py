"""Screenshots of the Server page's RPC section (issue 20): the Workers tab probing two real
``quantdesk worker`` processes on loopback ports and a dead port, the fit box counting the
two workers (a bar per device, the layers line, the dead one said), and the "Share this
machine" tab sharing (loopback), then with other machines allowed (its warning).

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.rpc_screenshots \
        [--out docs/screenshots]
    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.rpc_screenshots \
        --size 1280x720 --out docs/screenshots/1280x720

Writes ``server-workers.png``, ``server-fit-workers.png`` and ``server-share.png``. Settings
go to a temporary ``QUANTDESK_HOME``; the workers and the shared worker are stopped at the end.
Documentation tooling, run from the repository root; not part of the app.
"""

from __future__ import annotations

import argparse
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

from docs.tools.serving_screenshots import open_window, parse_size, wait_until

log = logging.getLogger(__name__)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_worker() -> tuple[subprocess.Popen[bytes], str]:
    from backend.llama.rpc_errors import RpcEndpointError
    from backend.llama.rpc_probe import probe_worker

    port = _free_port()
    cli = [sys.executable, "-m", "backend.entrypoints.main", "worker", "-p", str(port)]
    proc = subprocess.Popen([*cli, "-t", "1"], stdout=subprocess.DEVNULL)
    endpoint = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            probe_worker(endpoint, timeout_s=2.0)
            return proc, endpoint
        except RpcEndpointError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("quantdesk worker did not answer (is llama-cpp-python built with RPC?)")


def take(out: Path, size: tuple[int, int]) -> None:
    from PySide6.QtWidgets import QScrollArea

    from app.pages.server_page import ServerPage

    workers = [_start_worker(), _start_worker()]
    window = open_window(size)
    try:
        window.show_page("server")
        page = window.page("server")
        assert isinstance(page, ServerPage)
        box = page.workers_box
        for address in (*(e for _, e in workers), f"127.0.0.1:{_free_port()}"):
            box.endpoint_edit.setText(address)
            box.add_from_edit()
        wait_until(lambda: all(v.state != "testing" for v in box.views.values()), 30)
        box.table.selectRow(0)
        column = next(
            a for a in page.findChildren(QScrollArea) if a.widget() and a.widget().isAncestorOf(box)
        )
        wait_until(lambda: False, 0.3)
        column.verticalScrollBar().setValue(column.verticalScrollBar().maximum())
        wait_until(lambda: False, 0.3)
        out.mkdir(parents=True, exist_ok=True)
        window.grab().save(str(out / "server-workers.png"))
        log.info("wrote %s", out / "server-workers.png")

        # the fit box: a bar per worker device, the layers line, the dead worker said
        wait_until(lambda: len(page.fit_bar.view.devices if page.fit_bar.view else ()) == 2, 30)
        fit_box = page.fit_bar.parentWidget()
        column.verticalScrollBar().setValue(fit_box.y() - 12)
        wait_until(lambda: False, 0.3)
        window.grab().save(str(out / "server-fit-workers.png"))
        log.info("wrote %s", out / "server-fit-workers.png")

        share = page.share_box
        page.rpc_tabs.setCurrentWidget(share)
        column.verticalScrollBar().setValue(column.verticalScrollBar().maximum())
        share.port_spin.setValue(_free_port())
        share.toggle.setChecked(True)
        if not wait_until(lambda: share.supervisor.state.value == "sharing", 90):
            raise SystemExit(f"sharing did not start: {share.supervisor.last_error}")
        wait_until(lambda: False, 0.3)
        window.grab().save(str(out / "server-share.png"))
        log.info("wrote %s", out / "server-share.png")
    finally:
        window.close()  # stops the shared worker
        for proc, _ in workers:
            proc.terminate()
            proc.wait(20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--size", type=parse_size, default=(1440, 900))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    take(args.out, args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
