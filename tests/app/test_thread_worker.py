"""The generic background worker: results, progress, errors and cancelling, through real threads."""

from __future__ import annotations

import threading
from collections.abc import Generator

from PySide6.QtCore import QObject
from pytestqt.qtbot import QtBot
from shiboken6 import isValid

from app.workers.thread_worker import (
    ThreadWorker,
    _detached,
    start_worker,
    stop_worker,
    wait_for_workers,
)
from backend.core.errors import QuantDeskError


def _run(qtbot: QtBot, worker: ThreadWorker) -> list[tuple[str, object]]:
    """Start ``worker``, wait for it, and list its signals in order."""
    heard: list[tuple[str, object]] = []
    worker.yielded.connect(lambda v: heard.append(("yielded", v)))
    worker.returned.connect(lambda v: heard.append(("returned", v)))
    worker.errored.connect(lambda m: heard.append(("errored", m)))
    worker.cancelled.connect(lambda: heard.append(("cancelled", None)))
    with qtbot.waitSignal(worker.finished, timeout=10_000):
        worker.start()
    qtbot.waitUntil(lambda: bool(heard) and heard[-1][0] != "yielded", timeout=5000)
    return heard


def test_a_generator_yields_then_returns(qtbot: QtBot) -> None:
    def count() -> Generator[int, None, str]:
        yield 1
        yield 2
        return "done"

    heard = _run(qtbot, ThreadWorker(count))
    assert heard == [("yielded", 1), ("yielded", 2), ("returned", "done")]


def test_a_function_reports_progress_and_returns(qtbot: QtBot) -> None:
    def job() -> int:
        worker.report("half")
        return 42

    worker = ThreadWorker(job)
    assert _run(qtbot, worker) == [("yielded", "half"), ("returned", 42)]


def test_errors_become_messages(qtbot: QtBot) -> None:
    def user_error() -> None:
        raise QuantDeskError("no such model")

    def bug() -> None:
        raise KeyError("x")

    assert _run(qtbot, ThreadWorker(user_error)) == [("errored", "no such model")]
    assert _run(qtbot, ThreadWorker(bug)) == [("errored", "KeyError: 'x'")]


def test_a_generator_stops_at_its_next_yield_and_cleans_up(qtbot: QtBot) -> None:
    cleaned = threading.Event()

    def forever() -> Generator[int, None, None]:
        step = 0
        try:
            while True:
                step += 1
                if step == 3:
                    worker.cancel()  # the worker checks before asking for step 4
                yield step
        finally:
            cleaned.set()

    worker = ThreadWorker(forever)
    heard = _run(qtbot, worker)
    assert heard == [("yielded", 1), ("yielded", 2), ("yielded", 3), ("cancelled", None)]
    assert cleaned.is_set()


def test_a_function_that_raises_after_cancel_is_cancelled_and_a_return_is_kept(
    qtbot: QtBot,
) -> None:
    def stops() -> None:
        worker.cancel_event.wait(10)
        raise QuantDeskError("stopped")

    worker = ThreadWorker(stops)
    worker.cancel()
    assert _run(qtbot, worker) == [("cancelled", None)]

    partial = ThreadWorker(lambda: "partial")
    partial.cancel()
    assert _run(qtbot, partial) == [("returned", "partial")]


def test_start_worker_owns_and_wait_for_workers_stops_them(qtbot: QtBot) -> None:
    owner = QObject()
    results: list[object] = []
    release = threading.Event()

    def slow() -> Generator[None, None, str]:
        while not release.wait(0.01):
            yield None
        return "late"

    worker = start_worker(owner, slow, results.append, results.append)
    assert owner.findChildren(ThreadWorker) == [worker]
    wait_for_workers(owner, 10_000)  # cancels, then waits
    assert worker.isFinished()
    qtbot.wait(50)
    assert results == []  # cancelled: neither returned nor errored


def test_a_worker_past_the_wait_is_detached_and_outlives_its_owner(qtbot: QtBot) -> None:
    owner = QObject()
    release = threading.Event()
    results: list[object] = []
    ended: list[bool] = []

    def stubborn() -> str:  # ignores cancel_event, as a blocking call might
        release.wait(10)
        ended.append(True)
        return "late"

    worker = start_worker(owner, stubborn, results.append, results.append)
    assert not stop_worker(worker, 50)  # still running after the wait
    assert worker.parent() is None and worker in _detached
    owner.deleteLater()  # the page goes; its running thread must not be destroyed
    qtbot.waitUntil(lambda: not isValid(owner), timeout=2000)
    assert worker.isRunning()

    release.set()
    qtbot.waitUntil(lambda: not _detached, timeout=5000)  # released once finished
    qtbot.waitUntil(lambda: not isValid(worker), timeout=2000)  # and deleted
    assert ended == [True]
    assert results == []  # the owner is gone: nothing is reported to it


def test_start_worker_reports_a_cancel(qtbot: QtBot) -> None:
    owner = QObject()
    cancelled: list[bool] = []
    results: list[object] = []

    def job() -> Generator[None, None, None]:
        while True:
            yield None

    worker = start_worker(
        owner, job, results.append, results.append, lambda: cancelled.append(True)
    )
    qtbot.waitUntil(worker.isRunning, timeout=2000)
    assert stop_worker(worker, 5000)
    qtbot.waitUntil(lambda: cancelled == [True], timeout=2000)
    assert results == []
