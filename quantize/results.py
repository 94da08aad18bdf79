"""What a quantisation job made: the one result shape the pipeline emits and the GUI reads.

Plain pydantic, no llama.cpp, so the GUI may import it. ``quantdesk quantize`` sends
``JobResult.model_dump(mode="json")`` as its result event (paths as strings).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class Fallback(BaseModel):
    """A tensor whose shape did not fit the wanted type, so another type was used."""

    tensor: str
    ncols: int
    wanted: str
    used: str


class QuantizeResult(BaseModel):
    """One GGUF file a job wrote (a quantised type, or the conversion's F16/BF16)."""

    path: Path
    sidecar: Path
    source: Path
    type: str
    size_bytes: int
    seconds: float
    n_tensors: int
    imatrix: Path | None
    fallbacks: list[Fallback] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class JobResult(BaseModel):
    """Everything one ``quantdesk quantize`` job made, and its warnings."""

    outputs: list[QuantizeResult] = Field(default_factory=list)
    converted: Path | None = Field(default=None, description="the converted GGUF, if any")
    imatrix: Path | None = None
    warnings: list[str] = Field(default_factory=list)
