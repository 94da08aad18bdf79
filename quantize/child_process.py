"""Run a child process, hand each output line to a callback, terminate it on cancel.

Used for the HF -> GGUF converter and the quantiser worker, so memory stays isolated
and cancel is a plain terminate. Carriage returns (tqdm progress bars) also end a line.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO

from quantize.errors import QuantizeCancelledError

log = logging.getLogger(__name__)

TERMINATE_GRACE_S = 5.0
_POLL_S = 0.1


@dataclass
class ChildResult:
    returncode: int
    tail: list[str] = field(default_factory=list)


def _pump(stream: IO[bytes], lines: queue.Queue[str | None]) -> None:
    buf = b""
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        buf += chunk
        while True:
            cut = min((i for i in (buf.find(b"\n"), buf.find(b"\r")) if i >= 0), default=-1)
            if cut < 0:
                break
            line, buf = buf[:cut], buf[cut + 1 :]
            if line:
                lines.put(line.decode("utf-8", "replace"))
    if buf:
        lines.put(buf.decode("utf-8", "replace"))
    lines.put(None)


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill after a grace period."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(TERMINATE_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_child(
    argv: Sequence[str],
    on_line: Callable[[str], None],
    cancel: threading.Event | None = None,
    *,
    what: str,
    env: dict[str, str] | None = None,
    tail_lines: int = 40,
) -> ChildResult:
    """Run ``argv`` with stdout and stderr merged; return its exit code and last lines.

    Raises :class:`QuantizeCancelledError` (after terminating the child) when ``cancel``
    is set while it runs.
    """
    log.debug("starting %s: %s", what, " ".join(argv))
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=child_env,
    )
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()
    tail: list[str] = []
    try:
        while True:
            if cancel is not None and cancel.is_set():
                terminate(proc)
                raise QuantizeCancelledError(f"{what} cancelled")
            try:
                line = lines.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if line is None:
                break
            tail.append(line)
            del tail[:-tail_lines]
            on_line(line)
        proc.wait()
    except BaseException:
        terminate(proc)
        raise
    finally:
        reader.join(timeout=1.0)
        proc.stdout.close()
    return ChildResult(proc.returncode, tail)
