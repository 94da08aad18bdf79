"""Requests a front end has received but not yet handed to the engine.

Clients that start together (a team's IDE plugins, a benchmark's wave, n parallel
agents) reach the server within a few milliseconds, but each one is parsed, templated
and tokenised in Python before it is submitted. A scheduler that starts decoding the
first prompt at once makes the others wait a whole prefill step. The server marks each
generation request as arriving when it comes in and done once it is submitted (or has
failed); the scheduler, about to admit new prompts, waits a few milliseconds for the
arrivals still being prepared so that they share the first prefill step.
"""

from __future__ import annotations

import threading


class Arrival:
    """One request on its way to the engine; :meth:`done` may be called more than once."""

    def __init__(self, owner: Arrivals) -> None:
        self._owner = owner
        self.open = True

    def done(self) -> None:
        self._owner._finish(self)


class Arrivals:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending = 0
        self.opened = 0

    @property
    def pending(self) -> int:
        return self._pending

    def begin(self) -> Arrival:
        with self._cond:
            self._pending += 1
            self.opened += 1
        return Arrival(self)

    def _finish(self, arrival: Arrival) -> None:
        with self._cond:
            if not arrival.open:
                return
            arrival.open = False
            self._pending -= 1
            if self._pending == 0:
                self._cond.notify_all()

    def wait_settled(self, timeout: float) -> bool:
        """Wait until no request is on its way, at most ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)
