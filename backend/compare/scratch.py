"""Scratch space of a comparison: the reference's stored log-probabilities.

That file holds a row of ``n_vocab`` 16-bit codes per scored token: about 1.5 GB for a
150k vocabulary on the default text, tens of GB on a long text. It goes to the system
temporary folder (``TMPDIR``; often RAM on Linux) unless ``--keep-base`` names a place,
so the space is checked before the reference pass starts, and the folders of runs whose
process died (killed, not cancelled) are removed at the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil

from backend.compare.base_logits import scored_per_chunk
from backend.compare.errors import CompareError
from backend.compare.metrics import row_width
from backend.core.units import human_bytes

log = logging.getLogger(__name__)

PREFIX = "quantdesk-compare-"
MARGIN_BYTES = 64 << 20


class ScratchSpaceError(CompareError):
    """Not enough free disk space for the reference's stored log-probabilities."""

    exit_code = 2


def base_file_bytes(n_chunk: int, n_ctx: int, n_vocab: int) -> int:
    """Size of the stored reference rows (the token header is negligible)."""
    return n_chunk * scored_per_chunk(n_ctx) * row_width(n_vocab) * 2


def check_space(path: Path, needed: int) -> None:
    free = shutil.disk_usage(path.parent).free
    if needed + MARGIN_BYTES > free:
        raise ScratchSpaceError(
            f"the reference's log-probabilities need {human_bytes(needed)} in {path.parent}, "
            f"only {human_bytes(free)} are free: use fewer chunks, or --keep-base on a "
            "bigger disk (or point TMPDIR at one)"
        )


def remove_stale_runs(root: Path | None = None) -> list[Path]:
    """Delete scratch folders left by comparisons whose process no longer runs."""
    root = root or Path(tempfile.gettempdir())
    removed = []
    for folder in root.glob(f"{PREFIX}*"):
        pid = folder.name.removeprefix(PREFIX).split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
            log.info("removed the scratch folder of a run that died: %s", folder)
    return removed


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """A temporary folder for this run, named after this process."""
    with contextlib.suppress(OSError):
        remove_stale_runs()
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-") as tmp:
        yield Path(tmp)
