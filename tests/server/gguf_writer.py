"""Copy a GGUF with extra metadata entries: how the tests make a model with FIM tokens
(or another declared property) out of the embedded SmolLM2.

Only the key/value section changes: the new entries are appended after the old ones,
the tensor infos are copied as they are (their offsets are relative to the data
section), the data section is re-aligned and copied byte for byte.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32, _INT32 = 8, 9, 4, 5


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> bytes:
        n = self.unpack("Q")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        return raw

    def skip_value(self, vtype: int) -> None:
        if vtype in _FIXED:
            self.pos += _FIXED[vtype]
        elif vtype == _STRING:
            self.string()
        elif vtype == _ARRAY:
            item_type = self.unpack("I")
            count = self.unpack("Q")
            if item_type in _FIXED:
                self.pos += _FIXED[item_type] * count
            else:
                for _ in range(count):
                    self.skip_value(item_type)
        else:
            raise ValueError(f"unknown GGUF value type {vtype}")


def _entry(key: str, value: int) -> bytes:
    raw = key.encode()
    vtype = _INT32 if value < 0 else _UINT32
    return (
        struct.pack("<Q", len(raw))
        + raw
        + struct.pack("<I", vtype)
        + struct.pack("<i" if value < 0 else "<I", value)
    )


def copy_with_metadata(src: Path, dst: Path, extra: dict[str, int]) -> Path:
    """Write ``dst``: ``src`` plus integer metadata ``extra`` (keys must be new)."""
    with src.open("rb") as f:
        head = f.read(64 * 1024 * 1024)  # the header of a small model fits easily
    r = _Reader(head)
    if head[:4] != b"GGUF":
        raise ValueError(f"{src} is not a GGUF file")
    r.pos = 4
    version = r.unpack("I")
    n_tensors = r.unpack("Q")
    n_kv = r.unpack("Q")
    kv_start = r.pos
    alignment = 32
    for _ in range(n_kv):
        key = r.string().decode()
        vtype = r.unpack("I")
        if key in extra:
            raise ValueError(f"{src} already has {key}")
        if key == "general.alignment" and vtype == _UINT32:
            alignment = r.unpack("I")
        else:
            r.skip_value(vtype)
    kv_end = r.pos
    for _ in range(n_tensors):
        r.string()
        n_dims = r.unpack("I")
        r.pos += 8 * n_dims + 4 + 8
    infos_end = r.pos
    data_start = -(-infos_end // alignment) * alignment

    header = bytearray(b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv + len(extra)))
    header += head[kv_start:kv_end]
    for key, value in extra.items():
        header += _entry(key, value)
    header += head[kv_end:infos_end]
    header += b"\0" * (-len(header) % alignment)

    part = dst.with_name(dst.name + ".part")
    with src.open("rb") as fin, part.open("wb") as fout:
        fout.write(header)
        fin.seek(data_start)
        shutil.copyfileobj(fin, fout, 1 << 20)
    part.replace(dst)
    return dst
