"""The ``--progress-jsonl`` protocol: typed events, one JSON object per stdout line.

A job (``quantdesk quantize | compare | bench | models pull --progress-jsonl``) writes any number of
``progress`` and ``warning`` lines, then a ``result`` line, an ``error`` line, or both in that
order: a ``result`` then an ``error`` when the job produced its result and still fails (compare's
quality gate: exit 5). At most one of each:

- ``{"type": "progress", "stage", "done", "total", "message", "tokens", "phase", "phases",
  "per_s", "eta_s"}``: ``done`` of ``total`` units of ``stage`` (the name of what runs now);
  ``phase`` (0-based) of ``phases`` places it in the whole job; the rate and time left
  where the job measures them. ``models pull``: bytes, one phase per file. ``compare``:
  phase 0 is the reference, phase ``k`` is candidate ``k`` of ``phases - 1`` (its "answers"
  stage keeps the phase).
  ``quantize``: one phase per step (download, convert, imatrix, then one per type).
- ``{"type": "warning", "message"}``: something the user should read; the job goes on.
- ``{"type": "result", ...payload}``: the job's result JSON, written flat beside ``type``
  (compare: ``CompareResult.to_json()`` plus ``outputs`` and ``gate_failures``).
- ``{"type": "error", "message", "exit_code", "error_type"}``: why the job failed, the
  exit code the process ends with (130: cancelled) and the exception's class name.

Readers call :func:`parse_event` on each line and dispatch on the event's class.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from backend.jobs.errors import CANCELLED_EXIT_CODE, JobProtocolError
from backend.jobs.progress import Progress


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_line(self) -> str:
        """This event as one JSON line (no trailing newline)."""
        return self.model_dump_json()


class ProgressEvent(_Event):
    """``done`` of ``total`` units of ``stage``, in phase ``phase`` of ``phases`` (0-based)."""

    type: Literal["progress"] = "progress"
    stage: str
    done: int
    total: int
    message: str = ""
    tokens: int = 0
    phase: int = 0
    phases: int = 1
    per_s: float | None = None  # units of ``stage`` per second, where measured
    eta_s: float | None = None  # seconds left in this phase, where known

    @classmethod
    def from_progress(cls, p: Progress) -> ProgressEvent:
        return cls(**asdict(p))

    @property
    def fraction(self) -> float:
        """How much of the whole job is done, 0..1, counting finished phases as whole."""
        within = min(1.0, self.done / self.total) if self.total > 0 else 0.0
        return min(1.0, (self.phase + within) / max(1, self.phases))


class WarningEvent(_Event):
    """A message the user should read; the job goes on."""

    type: Literal["warning"] = "warning"
    message: str


class ResultEvent(_Event):
    """The job's result JSON; on the line its keys sit flat beside ``"type": "result"``."""

    type: Literal["result"] = "result"
    payload: dict[str, Any]

    @field_validator("payload")
    @classmethod
    def _payload_has_no_type(cls, payload: dict[str, Any]) -> dict[str, Any]:
        if "type" in payload:
            raise ValueError('a result payload cannot have a top-level "type" key')
        return payload

    def to_line(self) -> str:
        return json.dumps({"type": self.type, **self.payload})


class ErrorEvent(_Event):
    """The job failed: ``message`` for people, ``exit_code`` (130: cancelled), ``error_type``."""

    type: Literal["error"] = "error"
    message: str
    exit_code: int = 1
    error_type: str = "Exception"

    @classmethod
    def from_exception(cls, exc: BaseException) -> ErrorEvent:
        exit_code = getattr(exc, "exit_code", 1)
        if isinstance(exc, KeyboardInterrupt):
            exit_code = CANCELLED_EXIT_CODE
        return cls(
            message=str(exc) or type(exc).__name__,
            exit_code=int(exit_code),
            error_type=type(exc).__name__,
        )

    @property
    def cancelled(self) -> bool:
        return self.exit_code == CANCELLED_EXIT_CODE


JobEvent = Annotated[
    ProgressEvent | WarningEvent | ResultEvent | ErrorEvent, Field(discriminator="type")
]
_EVENT = TypeAdapter[JobEvent](JobEvent)


def parse_event(line: str | bytes) -> JobEvent:
    """One ``--progress-jsonl`` line as its typed event; raises :class:`JobProtocolError`
    for a line that is not one (e.g. a stray print of a library)."""
    try:
        data = json.loads(line)
        if isinstance(data, dict) and data.get("type") == "result":
            payload = {key: value for key, value in data.items() if key != "type"}
            return ResultEvent(payload=payload)
        return _EVENT.validate_python(data)
    except (ValueError, ValidationError) as exc:  # JSONDecodeError is a ValueError
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        raise JobProtocolError(f"not a job event: {text[:200]!r}") from exc
