"""The comparison's scratch space: its size is known up front and checked; folders of
runs that died are cleaned up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from backend.compare.base_logits import BaseLogitsWriter, scored_per_chunk
from backend.compare.metrics import row_width
from backend.compare.scratch import (
    PREFIX,
    ScratchSpaceError,
    base_file_bytes,
    check_space,
    remove_stale_runs,
)


def test_predicted_size_is_what_the_writer_writes(tmp_path: Path) -> None:
    n_ctx, n_chunk, n_vocab = 64, 3, 1001
    tokens = np.arange(n_ctx * n_chunk, dtype=np.int32)
    writer = BaseLogitsWriter(tmp_path / "b.kld", n_ctx, n_vocab, tokens)
    writer._fh.flush()  # type: ignore[union-attr]
    header = writer.part.stat().st_size
    rows = np.zeros((scored_per_chunk(n_ctx), row_width(n_vocab)), dtype=np.uint16)
    for _ in range(n_chunk):
        writer.write_rows(rows)
    writer.commit()
    size = (tmp_path / "b.kld").stat().st_size
    assert size - header == base_file_bytes(n_chunk, n_ctx, n_vocab)


def test_too_little_space_is_refused_before_the_reference_pass(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(ScratchSpaceError, match=r"need .* [KMGT]iB .* --keep-base"):
        check_space(tmp_path / "reference.kld", free + (1 << 30))
    check_space(tmp_path / "reference.kld", 1 << 20)  # a small file fits


def test_folders_of_dead_runs_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = tmp_path / f"{PREFIX}{done.stdout.strip()}-abc"
    alive = tmp_path / f"{PREFIX}{os.getpid()}-def"
    other = tmp_path / "unrelated"
    for folder in (dead, alive, other):
        folder.mkdir()
        (folder / "reference.kld.part").write_bytes(b"x" * 100)
    assert remove_stale_runs(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and other.exists()
