"""What other threads hand the scheduler: new requests, cancellations and work on the KV
between steps (a slot's save, restore or erase), and the count of requests waiting or
running that bounds the queue."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from backend.engine.errors import QueueFullError
from backend.engine.sequence import Sequence


@dataclass(eq=False)
class ControlTask:
    """Work that touches the KV outside a request: run on the scheduler thread between two
    steps, its result or exception set on ``future``."""

    run: Callable[[], Any]
    future: Future[Any]


@dataclass
class Arrived:
    """What one drain of the inbox took: new sequences, request ids to cancel and control
    tasks, in order of arrival within each."""

    submitted: list[Sequence] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    controls: list[ControlTask] = field(default_factory=list)


class RequestInbox:
    """Thread-safe: ``submit``, ``cancel``, ``control`` and ``wake`` from any thread, the rest
    from the scheduler's."""

    def __init__(self, *, parallel: int, max_queue: int) -> None:
        self.parallel = parallel
        self.max_queue = max_queue
        self._queue: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._queued = 0  # submitted and not yet admitted (or admitted again after a preempt)

    def submit(self, seq: Sequence) -> None:
        """Queue ``seq``; QueueFullError when ``parallel`` run and ``max_queue`` wait."""
        with self._lock:
            if self._queued >= self.max_queue + self.parallel:
                raise QueueFullError(
                    f"server busy: {self.parallel} sequences running and "
                    f"{self.max_queue} waiting; retry shortly"
                )
            self._queued += 1
        self._queue.put(("submit", seq))

    def cancel(self, request_id: int) -> None:
        self._queue.put(("cancel", request_id))

    def control(self, task: ControlTask) -> None:
        """Queue ``task`` (not counted against the queue bound)."""
        self._queue.put(("control", task))

    def wake(self) -> None:
        """Wake a blocked :meth:`drain` (the scheduler is stopping)."""
        self._queue.put(("wake", None))

    def drain(self, *, block: bool) -> Arrived:
        """Everything queued so far; with ``block``, wait up to 0.5 s for the first item."""
        arrived = Arrived()
        try:
            item = self._queue.get(timeout=0.5) if block else self._queue.get_nowait()
        except queue.Empty:
            return arrived
        while True:
            kind, payload = item
            if kind == "submit":
                assert isinstance(payload, Sequence)
                arrived.submitted.append(payload)
            elif kind == "cancel":
                assert isinstance(payload, int)
                arrived.cancelled.append(payload)
            elif kind == "control":
                assert isinstance(payload, ControlTask)
                arrived.controls.append(payload)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return arrived

    def dequeued(self) -> None:
        """A queued request was admitted or cancelled before it ran."""
        with self._lock:
            self._queued -= 1

    def requeued(self) -> None:
        """A running request went back to the queue (preempted)."""
        with self._lock:
            self._queued += 1
