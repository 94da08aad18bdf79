"""The stats poller parses each /v1/stats body into the server's model, skips a failed poll
(saying so once), stamps each snapshot when its response arrived, sends the key, and stops
promptly when its worker is cancelled."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from pytestqt.qtbot import QtBot

from app.workers.stats_poller import StatsReading, poll_stats, stats_poller
from backend.engine.stats_model import StatsSnapshot
from tests.server.stats_sample import sample_stats

KEY = "sk-test"


class _Stats(BaseHTTPRequestHandler):
    """Answers 503 (loading), then a body that is not a snapshot, then snapshots 1, 2, ..."""

    calls: ClassVar[int] = 0
    keys: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        cls = type(self)
        cls.calls += 1
        cls.keys.append(self.headers.get("Authorization"))
        if cls.calls == 1:
            status, body = 503, b'{"error": {"message": "the model is still loading"}}'
        elif cls.calls == 2:
            status, body = 200, b'{"requests": {}}'
        else:
            status, body = 200, sample_stats(cls.calls - 2).model_dump_json().encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def stats_url() -> Iterator[str]:
    _Stats.calls, _Stats.keys = 0, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stats)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_failed_polls_are_skipped_and_logged_once(
    stats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    stop = threading.Event()
    caplog.set_level(logging.INFO, logger="app.workers.stats_poller")
    polls = poll_stats(stats_url, KEY, 0.01, stop)
    before = time.monotonic()
    first, second = next(polls), next(polls)
    after = time.monotonic()
    assert isinstance(first.snapshot, StatsSnapshot)
    assert (first.snapshot, second.snapshot) == (sample_stats(1), sample_stats(2))
    # stamped as each response arrived, in order, within the polls
    assert before < first.received_at < second.received_at <= after
    assert _Stats.calls == 4 and set(_Stats.keys) == {f"Bearer {KEY}"}
    failures = [r.getMessage() for r in caplog.records if r.name == "app.workers.stats_poller"]
    assert len(failures) == 1 and "503" in failures[0]
    stop.set()
    assert next(polls, None) is None  # the loop ends at the next check


def test_the_worker_yields_snapshots_and_stops_when_cancelled(stats_url: str, qtbot: QtBot) -> None:
    worker = stats_poller(stats_url, interval_s=0.05)
    got: list[StatsReading] = []
    handled: list[float] = []
    worker.yielded.connect(got.append)
    worker.yielded.connect(lambda _reading: handled.append(time.monotonic()))
    worker.start()
    qtbot.waitUntil(lambda: len(got) >= 3, timeout=10_000)
    assert [r.snapshot.requests.completed for r in got[:3]] == [1, 2, 3]
    # the stamp is the arrival in the worker thread, not when the GUI thread handled it
    assert all(r.received_at <= h for r, h in zip(got, handled, strict=False))
    assert _Stats.keys[0] is None  # no key, no header
    started = time.monotonic()
    worker.cancel()
    assert worker.wait(3000)
    assert time.monotonic() - started < 1.0
