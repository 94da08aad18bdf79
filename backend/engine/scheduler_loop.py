"""Who drives the scheduler, and what other threads may ask of it.

The loop runs on the scheduler's own thread, or (tests, benchmarks) is driven by one caller
through :meth:`SchedulerLoop.step_once` while that thread is not running: two drivers would
race on the sequences and the outbox. Any thread may submit, cancel, queue work to run
between two steps (:meth:`SchedulerLoop.between_steps`) and stop it. Each turn takes what
arrived (waiting briefly for requests still being prepared, so they share the first
prefill), admits, runs one step and publishes the gauges; :class:`Scheduler
<backend.engine.scheduler.Scheduler>` says what those do.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from backend.engine.arrivals import Arrivals
from backend.engine.engine_stats import EngineStats
from backend.engine.errors import EngineStoppedError, QueueFullError
from backend.engine.outbox import Outbox
from backend.engine.request_inbox import ControlTask, RequestInbox
from backend.engine.request_types import FinishReason
from backend.engine.sequence import Sequence
from backend.engine.step_planner import StepPlan

log = logging.getLogger(__name__)

# Before admitting new prompts, wait at most this long for requests still being prepared.
ARRIVAL_WINDOW_S = 0.02

T = TypeVar("T")


class SchedulerLoop(ABC):
    """The queues, the thread and the turn; the step itself is the subclass's."""

    def __init__(self, *, parallel: int, max_queue: int) -> None:
        self.parallel = parallel
        self.max_queue = max_queue
        self.stats = EngineStats()
        self.arrivals = Arrivals()
        self.arrival_window = ARRIVAL_WINDOW_S
        self._inbox = RequestInbox(parallel=parallel, max_queue=max_queue)
        self._waiting: deque[Sequence] = deque()
        self._running: list[Sequence] = []
        self._outbox = Outbox()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quantdesk-scheduler", daemon=True)
        self.failure: str | None = None

    # ---- the step's phases, the subclass's ----------------------------------------
    @abstractmethod
    def _admit(self) -> None: ...

    @abstractmethod
    def _step(self) -> StepPlan: ...

    @abstractmethod
    def _publish_gauges(self) -> None: ...

    @abstractmethod
    def _finish(self, seq: Sequence, reason: FinishReason) -> None: ...

    @abstractmethod
    def _emit_error(
        self, seq: Sequence, message: str, *, invalid_request: bool = False
    ) -> None: ...

    # ---- called from any thread ------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, seq: Sequence) -> None:
        if self._stop.is_set() or self.failure:
            raise EngineStoppedError(self.failure or "the engine is shutting down")
        try:
            self._inbox.submit(seq)
        except QueueFullError:
            with self.stats.lock():  # request threads may be refused at once
                self.stats.rejected_busy += 1
            raise

    def cancel(self, request_id: int) -> None:
        self._inbox.cancel(request_id)

    def between_steps(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the scheduler thread between two steps (before the next
        admission), where it may read and change the KV; its result or exception comes in
        the future. EngineStoppedError at once when the engine is stopping."""
        if self._stop.is_set() or self.failure:
            raise EngineStoppedError(self.failure or "the engine is shutting down")
        future: Future[T] = Future()
        self._inbox.control(ControlTask(work, future))
        if self._stop.is_set() and not self._thread.is_alive():  # stopped meanwhile
            self._fail_controls()
        return future

    def stop(self) -> None:
        self._stop.set()
        self._inbox.wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
        if not self._thread.is_alive():  # work queued as the loop ended: none left waiting
            self._fail_controls()

    # ---- scheduler thread --------------------------------------------------------
    @property
    def running(self) -> tuple[Sequence, ...]:
        """The sequences admitted and not finished, in admission order."""
        return tuple(self._running)

    def step_once(self, *, block: bool = False) -> StepPlan:
        """One turn of the scheduler loop: take new requests and cancellations (with
        ``block``, wait up to 0.5 s for one), admit, and run one step. Returns the plan
        that step decoded (no calls when none ran). The scheduler thread runs it in a
        loop; without the thread, a caller drives the engine with it."""
        self._require_driver("step_once")
        self._collect(block=block)
        if self._stop.is_set():
            return StepPlan()
        self._admit()
        plan = self._step() if self._running else StepPlan()
        if not self._running:
            self._deliver()  # no decode follows: deliver now
        self._publish_gauges()
        return plan

    def deliver_events(self) -> None:
        """Hand the events gathered so far to their sinks (the loop does this right before
        each ``llama_decode``, and when nothing runs)."""
        self._require_driver("deliver_events")
        self._deliver()

    def _deliver(self) -> None:
        """:meth:`deliver_events` for the loop itself, which already holds the right to drive."""
        self._outbox.deliver()

    def _require_driver(self, method: str) -> None:
        """Only the scheduler thread, or any one caller while that thread is not running,
        may drive the loop: two drivers would race on the sequences and the outbox."""
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            raise RuntimeError(
                f"Scheduler.{method} called from {threading.current_thread().name} while the "
                "scheduler thread runs: only that thread may drive a started scheduler"
            )

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.step_once(block=not self._running and not self._waiting)
        except Exception as exc:  # never leave clients hanging
            log.exception("scheduler crashed")
            self.failure = f"engine failure: {exc}"
            for seq in [*self._running, *self._waiting]:
                self._emit_error(seq, self.failure)
        finally:
            for seq in [*self._running, *self._waiting]:
                if not self.failure:
                    self._emit_error(seq, "the server is shutting down")
            self._running.clear()
            self._waiting.clear()
            self._fail_controls()  # never leave them waiting
            self._deliver()

    def _collect(self, *, block: bool) -> None:
        """Take new requests and cancellations. When new requests came in while others
        are still being prepared by the server, wait (at most ``arrival_window``) for
        those too, so that they share the first prefill step rather than wait a whole one."""
        if self._drain_inbox(block=block) and self.arrivals.pending and self._idle_slots():
            self.arrivals.wait_settled(self.arrival_window)
            self._drain_inbox(block=False)

    def _idle_slots(self) -> bool:
        """Nothing is generating, so a short wait delays no stream, and a slot is free for
        the arrivals to join."""
        return len(self._running) < self.parallel and not any(
            seq.generating for seq in self._running
        )

    def _drain_inbox(self, *, block: bool) -> int:
        """Take everything queued for the scheduler; returns how many new requests."""
        arrived = self._inbox.drain(block=block)
        for seq in arrived.submitted:
            self._waiting.append(seq)
            self.stats.prompt_total += seq.n_prompt
        for request_id in arrived.cancelled:
            self._cancel(request_id)
        for task in arrived.controls:
            self._run_control(task)
        return len(arrived.submitted)

    def _run_control(self, task: ControlTask) -> None:
        if not task.future.set_running_or_notify_cancel():
            return  # its caller gave up
        try:
            result = task.run()
        except Exception as exc:  # the caller's to answer; the loop goes on
            task.future.set_exception(exc)
        else:
            task.future.set_result(result)

    def _cancel(self, request_id: int) -> None:
        for seq in list(self._waiting):
            if seq.request.request_id == request_id:
                self._waiting.remove(seq)
                self._inbox.dequeued()
                self._finish(seq, "cancelled")
                return
        for seq in list(self._running):
            if seq.request.request_id == request_id:
                self._finish(seq, "cancelled")
                return

    def _fail_controls(self) -> None:
        for task in self._inbox.drain(block=False).controls:
            if task.future.set_running_or_notify_cancel():
                task.future.set_exception(
                    EngineStoppedError(self.failure or "the engine is shutting down")
                )
