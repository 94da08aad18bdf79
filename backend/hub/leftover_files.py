"""What interrupted work leaves in the library: unfinished downloads (``.part`` files under
``.downloads/``) and quantisation or conversion outputs never renamed into place; listing
them, and deleting those no live process is writing."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

from backend.hub.library_paths import OUTPUT_PART_GLOB, PARTIAL_DIR
from backend.hub.writer_lock import sole_writer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnfinishedOutput:
    """A quantisation or conversion output not yet renamed into the library."""

    path: Path
    size: int
    in_use: bool  # a live run is writing it; False: left by a run that died


def _discard_unwritten(parts: list[Path], busy: str) -> list[tuple[Path, int]]:
    """Delete each of ``parts`` that no process is writing (it holds the writer lock
    otherwise); returns what went, with sizes."""
    removed = []
    for part in parts:
        with sole_writer(part) as sole:
            if not sole:
                log.info("%s %s; kept", part, busy)
                continue
            with contextlib.suppress(FileNotFoundError):
                size = part.stat().st_size
                part.unlink()
                removed.append((part, size))
    return removed


def partial_downloads(library: Path) -> list[tuple[Path, int]]:
    """Unfinished downloads (``.part`` files) and their sizes, largest first: a cancelled
    download left for later, or one whose file changed on the Hub since."""
    folder = library / PARTIAL_DIR
    parts = [(p, p.stat().st_size) for p in folder.rglob("*.part") if p.is_file()]
    return sorted(parts, key=lambda item: -item[1])


def discard_partial_downloads(library: Path) -> list[tuple[Path, int]]:
    """Delete the unfinished downloads no process is writing; returns what went."""
    removed = _discard_unwritten(
        [part for part, _ in partial_downloads(library)], "is being downloaded"
    )
    for folder in sorted((library / PARTIAL_DIR).glob("**/"), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only empty ones go
    return removed


def _output_parts(library: Path) -> list[Path]:
    return [
        p
        for p in library.rglob(OUTPUT_PART_GLOB)
        if p.relative_to(library).parts[0] != PARTIAL_DIR and p.is_file()
    ]


def unfinished_outputs(library: Path) -> list[UnfinishedOutput]:
    """Quantisation and conversion outputs in the library that were never finished
    (``<name>.gguf.part``), largest first: those a run is writing now, and those a
    killed or crashed run left behind."""
    found = []
    for part in _output_parts(library):
        with sole_writer(part) as sole, contextlib.suppress(FileNotFoundError):
            found.append(UnfinishedOutput(part, part.stat().st_size, in_use=not sole))
    return sorted(found, key=lambda o: -o.size)


def discard_unfinished_outputs(library: Path) -> list[tuple[Path, int]]:
    """Delete the unfinished outputs of runs that died; returns what went."""
    return _discard_unwritten(_output_parts(library), "is being written by a running quantisation")
