"""The comparison's results: typed records and their JSON form (percentages are 0-100)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ModelFacts:
    """Size and speed of one GGUF."""

    path: str
    name: str
    size_bytes: int
    n_params: int
    bpw: float  # 8 * file size / parameters
    load_s: float
    prompt_tok_s: float
    gen_tok_s: float


@dataclass
class ReferenceResult(ModelFacts):
    ppl: float = float("nan")
    ppl_unc: float = 0.0


@dataclass
class CandidateResult(ModelFacts):
    ppl: float = float("nan")
    ppl_unc: float = 0.0
    ppl_ratio: float = float("nan")
    ln_ppl_ratio: float = float("nan")
    kld_mean: float = float("nan")
    kld_mean_unc: float = 0.0
    kld_max: float = float("nan")
    kld_p99: float = float("nan")
    kld_p90: float = float("nan")
    kld_median: float = float("nan")
    rms_dp_pct: float = float("nan")
    mean_dp_pct: float = float("nan")
    max_abs_dp_pct: float = float("nan")
    same_top_pct: float = float("nan")
    ln_ppl_ratio_unc: float = 0.0
    same_top_pct_unc: float = 0.0
    eval_s: float = 0.0


@dataclass
class Answer:
    """One prompt and every model's greedy reply, reference first."""

    prompt: str
    reference: str
    candidates: list[str]


@dataclass
class CompareResult:
    reference: ReferenceResult
    candidates: list[CandidateResult]
    answers: list[Answer]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data; numbers that were not measured (NaN) become ``null``."""
        return {
            "reference": _finite(asdict(self.reference)),
            "candidates": [_finite(asdict(c)) for c in self.candidates],
            "answers": [asdict(a) for a in self.answers],
            "settings": self.settings,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompareResult:
        return cls(
            reference=ReferenceResult(**_nan(data["reference"])),
            candidates=[CandidateResult(**_nan(c)) for c in data["candidates"]],
            answers=[Answer(**a) for a in data["answers"]],
            settings=dict(data.get("settings", {})),
        )


def _finite(record: dict[str, Any]) -> dict[str, Any]:
    return {
        k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()
    }


def _nan(record: dict[str, Any]) -> dict[str, Any]:
    return {k: math.nan if v is None else v for k, v in record.items()}


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``<path>.part`` and rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)
    return path


def write_json(result: CompareResult, path: Path) -> Path:
    text = json.dumps(result.to_json(), indent=2, allow_nan=False)
    return write_atomic(path, text.encode("utf-8"))
