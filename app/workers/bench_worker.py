"""Run ``backend.bench.run_benchmark`` in a thread, with progress and cancel."""

from __future__ import annotations

import logging
import threading

from PySide6.QtCore import QThread, Signal

from backend.bench import BenchCancelled, BenchConfig, BenchError, BenchProgress, run_benchmark

log = logging.getLogger(__name__)


class BenchWorker(QThread):
    """``progressed(done, total, message)``, then ``succeeded(BenchResult)`` or ``failed(str)``."""

    progressed = Signal(int, int, str)
    succeeded = Signal(object)
    failed = Signal(str)

    def __init__(self, config: BenchConfig) -> None:
        super().__init__()
        self.config = config
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def _on_progress(self, p: BenchProgress) -> None:
        self.progressed.emit(p.done, p.total, p.message)

    def run(self) -> None:
        try:
            result = run_benchmark(self.config, progress=self._on_progress, cancel=self._cancel)
        except BenchCancelled:
            self.failed.emit("Cancelled.")
            return
        except BenchError as exc:
            self.failed.emit(str(exc))
            return
        except Exception as exc:  # report, never kill the GUI thread's event loop
            log.exception("benchmark crashed")
            self.failed.emit(f"{type(exc).__name__}: {exc}")
            return
        self.succeeded.emit(result)
