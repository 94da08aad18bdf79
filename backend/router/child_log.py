"""A model server's log lines, forwarded to the router's own log with the model's id.

Each child writes its log to ``serve.log`` in its work folder (kept whole there, its last
lines quoted in load errors). This follows that file and logs every new line on the
``backend.router.child_log`` logger as ``[model-id] message``, at the level the child
logged it, so ``quantdesk serve`` and the GUI's log view (which reads the router's output)
show what each model's server says. Following the file, not a pipe, means a child never
blocks on a busy router, and forked and freshly started children are followed alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

# how often the log file is read for new lines
FOLLOW_PERIOD_S = 0.1
# a line as backend/entrypoints/main.py formats it: "2026-12-01 14:35:47,649 INFO name: msg"
_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<message>.*)$")
# a line longer than this is forwarded in pieces (a runaway line never grows a buffer)
_MAX_LINE = 64 * 1024


def forward_line(model_id: str, line: str) -> None:
    """Log one line of ``model_id``'s server: at the child's level when the line carries
    one (its own timestamp dropped: the router's log adds one), else as INFO."""
    line = line.rstrip()
    if not line:
        return
    match = _LINE.match(line)
    level = logging.INFO
    if match is not None:
        level = logging.getLevelNamesMapping().get(match["level"], logging.INFO)
        line = match["message"]
    log.log(level, "[%s] %s", model_id, line)


class ChildLogForwarder:
    """Follows one child's log file from its start; :meth:`close` forwards the rest."""

    def __init__(self, model_id: str, path: Path) -> None:
        self.model_id = model_id
        self.path = path
        self._offset = 0
        self._partial = b""
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def start(cls, model_id: str, path: Path) -> ChildLogForwarder:
        forwarder = cls(model_id, path)
        forwarder._task = asyncio.create_task(forwarder._follow(), name=f"log-{model_id}")
        return forwarder

    async def _follow(self) -> None:
        while True:
            self.read_new()
            await asyncio.sleep(FOLLOW_PERIOD_S)

    def read_new(self, *, final: bool = False) -> None:
        """Forward the complete lines written since the last read (and, when ``final``,
        an unterminated last line)."""
        try:  # a stat is cheaper than an open, and most polls find nothing new
            if not final and os.stat(self.path).st_size == self._offset:
                return
        except OSError:
            return
        try:
            with self.path.open("rb") as f:
                if os.fstat(f.fileno()).st_size < self._offset:  # truncated: from the top
                    self._offset, self._partial = 0, b""
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > _MAX_LINE or (final and self._partial):
            lines.append(self._partial)
            self._partial = b""
        for raw in lines:
            forward_line(self.model_id, raw.decode("utf-8", errors="replace"))

    async def close(self) -> None:
        """Stop following, after forwarding every line still unread."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self.read_new(final=True)
