"""A ``QProcess`` for a ``quantdesk`` child (the server, a shared RPC worker): output and
errors on one channel, unbuffered, and, unless frozen, the project on ``PYTHONPATH`` so a
source checkout's child runs the same code as the window."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from PySide6.QtCore import QObject, QProcess, QProcessEnvironment

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def quantdesk_process(parent: QObject, env: Mapping[str, str | None] | None = None) -> QProcess:
    """The process, not started; ``env`` entries are set (``None``: removed)."""
    process = QProcess(parent)
    process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
    environment = QProcessEnvironment.systemEnvironment()
    environment.insert("PYTHONUNBUFFERED", "1")
    for name, value in (env or {}).items():
        if value is None:
            environment.remove(name)
        else:
            environment.insert(name, value)
    if not getattr(sys, "frozen", False):
        extra = environment.value("PYTHONPATH", "")
        path = os.pathsep.join(p for p in (str(PROJECT_ROOT), extra) if p)
        environment.insert("PYTHONPATH", path)
    process.setProcessEnvironment(environment)
    return process


def read_lines(process: QProcess, partial: str) -> tuple[list[str], str]:
    """The complete lines the process has written since the last read (without line
    endings), and the unfinished rest to pass back in next time."""
    data = bytes(process.readAllStandardOutput().data()).decode("utf-8", "replace")
    lines = (partial + data).split("\n")
    rest = lines.pop()
    return [line.rstrip("\r") for line in lines], rest
