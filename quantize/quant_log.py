"""Parse llama.cpp's quantiser log into per-tensor progress and fallback events.

llama.cpp logs each tensor in pieces (``[  3/ 30] blk.0.attn_q.weight - [...], type = f16,``
then ``converting to q4_K .. `` then ``size = ...``); ``backend.llama.log_hook`` joins the
pieces into lines.
Shape-incompatible tensors log ``warning: NAME - ncols N not divisible by K (required for
type T) -> falling back to U``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TENSOR = re.compile(
    r"\[\s*(\d+)/\s*(\d+)\]\s+(\S+)\s+-\s+\[[^\]]*\],\s+type\s+=\s+(\S+),"
    r"(?:\s+converting to\s+(\S+))?"
)
_FALLBACK = re.compile(
    r"warning:\s+(\S+)\s+-\s+ncols\s+(\d+)\s+not divisible by\s+(\d+)\s+"
    r"\(required for type\s+(\S+)\).*?falling back to\s+(\S+)"
)


@dataclass(frozen=True)
class TensorEvent:
    index: int
    total: int
    name: str
    from_type: str
    to_type: str


@dataclass(frozen=True)
class FallbackEvent:
    name: str
    ncols: int
    wanted: str
    used: str


def parse_line(line: str) -> TensorEvent | FallbackEvent | None:
    if match := _FALLBACK.search(line):
        return FallbackEvent(match[1], int(match[2]), match[4].upper(), match[5].upper())
    if match := _TENSOR.search(line):
        from_type = match[4].upper()
        to_type = (match[5] or match[4]).upper()
        return TensorEvent(int(match[1]), int(match[2]), match[3], from_type, to_type)
    return None
