"""One writer per file across processes: the lock downloads and quantisations hold.

A run holds ``<file>.lock`` while it writes ``<file>``; the kernel drops the lock with
the process, so a killed run's leftover can be told from a live run's file, and a second
writer is refused instead of interleaving bytes into the same file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout


@contextlib.contextmanager
def sole_writer(part: Path) -> Iterator[bool]:
    """Hold ``part``'s writer lock while the block runs (True), or hold nothing when
    another process holds it (False)."""
    lock = FileLock(f"{part}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
        # leave no lock file behind (Windows' filelock removes it itself); a third
        # writer racing this exact moment could slip past, which is acceptable here
        with contextlib.suppress(OSError):
            Path(lock.lock_file).unlink()
