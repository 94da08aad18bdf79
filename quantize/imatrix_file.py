"""Importance-matrix data and its file format.

Files use llama.cpp's legacy ``.dat`` imatrix layout, which ``llama-quantize --imatrix``
also reads (little-endian)::

    int32 n_entries
    n_entries x { int32 len; char name[len]; int32 ncall; int32 nval; float32 values[nval] }
    int32 n_chunks; int32 len; char dataset[len]

We store ``ncall`` = number of activation rows (tokens) seen and ``values`` = the sum of
x² per input column, so ``values / ncall`` (what llama.cpp's loader computes) is the mean
square activation per column, and sums and counts round-trip exactly.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quantize.errors import ImatrixError

IMATRIX_SUFFIX = ".imatrix"


@dataclass
class ImatrixEntry:
    """Sum of squared inputs per column of one weight, over ``count`` activation rows."""

    sums: npt.NDArray[np.float64]
    count: int = 0


@dataclass
class Imatrix:
    entries: dict[str, ImatrixEntry] = field(default_factory=dict)
    n_chunks: int = 0
    dataset: str = ""

    def add(self, name: str, squares_sum: npt.NDArray[np.float64], rows: int) -> None:
        entry = self.entries.get(name)
        if entry is None:
            self.entries[name] = ImatrixEntry(squares_sum.astype(np.float64), rows)
            return
        if entry.sums.shape != squares_sum.shape:
            raise ImatrixError(
                f"inconsistent input size for {name}: {entry.sums.shape} vs {squares_sum.shape}"
            )
        entry.sums += squares_sum
        entry.count += rows

    def mean_squares(self) -> dict[str, npt.NDArray[np.float32]]:
        """Per-weight mean of x² per input column: what ``llama_model_quantize`` wants."""
        return {
            name: (e.sums / max(e.count, 1)).astype(np.float32) for name, e in self.entries.items()
        }


def save_imatrix(imatrix: Imatrix, path: Path) -> Path:
    """Write ``imatrix`` to ``path`` (temp name, then rename)."""
    if not imatrix.entries:
        raise ImatrixError("the importance matrix is empty; nothing to save")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with tmp.open("wb") as fh:
        fh.write(struct.pack("<i", len(imatrix.entries)))
        for name, entry in sorted(imatrix.entries.items()):
            name_b = name.encode("utf-8")
            values = entry.sums.astype("<f4")
            fh.write(struct.pack("<i", len(name_b)))
            fh.write(name_b)
            fh.write(struct.pack("<ii", entry.count, values.size))
            fh.write(values.tobytes())
        dataset = imatrix.dataset.encode("utf-8")
        fh.write(struct.pack("<ii", imatrix.n_chunks, len(dataset)))
        fh.write(dataset)
    os.replace(tmp, path)
    return path


def load_imatrix(path: Path) -> Imatrix:
    """Read a legacy ``.dat`` imatrix (ours or one written by llama-imatrix)."""
    path = Path(path)
    if not path.is_file():
        raise ImatrixError(f"imatrix file not found: {path}")
    data = path.read_bytes()
    if data[:4] == b"GGUF":
        raise ImatrixError(
            f"{path.name} is a GGUF-format imatrix; convert it to the legacy .dat format "
            "(llama-imatrix --output-format dat) or compute one with --calibration"
        )
    try:
        return _parse(data)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise ImatrixError(f"{path.name} is not a valid imatrix file: {exc}") from exc


def _parse(data: bytes) -> Imatrix:
    pos = 0

    def take(fmt: str) -> tuple[int, ...]:
        nonlocal pos
        values = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return values

    (n_entries,) = take("<i")
    if n_entries <= 0 or n_entries > 1_000_000:
        raise ValueError(f"implausible entry count {n_entries}")
    result = Imatrix()
    for _ in range(n_entries):
        (name_len,) = take("<i")
        if name_len <= 0 or pos + name_len > len(data):
            raise ValueError("bad name length")
        name = data[pos : pos + name_len].decode("utf-8")
        pos += name_len
        ncall, nval = take("<ii")
        if nval < 0 or pos + 4 * nval > len(data):
            raise ValueError(f"bad value count for {name}")
        values = np.frombuffer(data, dtype="<f4", count=nval, offset=pos).astype(np.float64)
        pos += 4 * nval
        result.entries[name] = ImatrixEntry(values, max(ncall, 1))
    if pos + 8 <= len(data):
        result.n_chunks, ds_len = take("<ii")
        result.dataset = data[pos : pos + ds_len].decode("utf-8", "replace")
    return result
