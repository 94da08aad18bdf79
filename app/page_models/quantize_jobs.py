"""The Quantise page's jobs without Qt: the form's options -> the ``quantdesk quantize`` line,
the queue (one job runs at a time), and what each job's card says, from the job's typed
events. The page shows it and runs the jobs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any

from backend.core.units import human_bytes
from backend.hub.library import LibraryEntry
from backend.jobs.events import ProgressEvent
from quantize.results import JobResult

FLOAT_TYPES = ("F32", "F16", "BF16")
DEFAULT_TYPES = ("Q8_0", "Q4_K_M")
STAGE_TEXT = {
    "download": "Downloading",
    "convert": "Converting to GGUF",
    "write": "Writing GGUF",
    "imatrix": "Importance matrix",
    "quantize": "Quantising",
}


class SourceKind(IntEnum):
    """Where the model comes from (the index in the page's source picker)."""

    LIBRARY = 0
    FOLDER = 1
    REPO = 2

    @property
    def label(self) -> str:
        return ("Library model", "Hugging Face folder", "Hub repo id")[self]


@dataclass(frozen=True)
class SourceAdvice:
    """The note under the source, and whether re-quantising should be ticked (``None``:
    leave the box as the user set it)."""

    note: str = ""
    requantize: bool | None = None


def source_advice(kind: SourceKind, entry: LibraryEntry | None) -> SourceAdvice:
    if kind is SourceKind.FOLDER:
        return SourceAdvice(
            "The folder is converted to an F16 GGUF first (needs the model's tokenizer)."
        )
    if kind is SourceKind.REPO:
        return SourceAdvice("The repo is downloaded into the library first (needs the network).")
    if entry is None:
        return SourceAdvice()
    if entry.format == "gguf" and (entry.file_type or "") not in FLOAT_TYPES:
        return SourceAdvice(
            f"{entry.name} is already quantised ({entry.file_type}): re-quantising works but "
            "loses more quality than starting from F16/BF16.",
            requantize=True,
        )
    if entry.format == "safetensors":
        return SourceAdvice(
            "A Hugging Face model is converted to F16 GGUF once, then quantised.",
            requantize=False,
        )
    return SourceAdvice(requantize=False)


def form_note(source: str, types: list[str], out_dir: str) -> tuple[bool, str]:
    """Whether the form can start, and the line under Start that says why not, or where the
    files go."""
    problems = []
    if not source:
        problems.append("choose a source")
    if not types:
        problems.append("tick at least one type")
    if problems:
        return False, "To start: " + " and ".join(problems) + "."
    return True, f"Files are written to {out_dir}."


@dataclass
class QuantizeOptions:
    """One job as the form describes it, and its ``quantdesk quantize`` line."""

    source: str
    types: list[str]
    calibration: str = ""  # a text file; empty: no importance matrix
    allow_requantize: bool = False
    threads: int | None = None
    out: str | None = None  # None: the library

    @property
    def title(self) -> str:
        """'model.gguf  →  Q8_0, Q4_K_M': the source's last path part and the types."""
        src = self.source
        name = Path(src).name if os.sep in src or Path(src).exists() else src
        return f"{name}  →  {', '.join(self.types)}"

    def remembered(self) -> dict[str, Any]:
        """What the page keeps for next time."""
        return {"types": self.types, "calibration": self.calibration, "threads": self.threads}

    def arguments(self) -> list[str]:
        """The ``quantdesk`` arguments (``--progress-jsonl`` is added by CliJob)."""
        args = ["quantize", self.source]
        for name in self.types:
            args += ["--type", name]
        if self.calibration:
            args += ["--calibration", self.calibration]
        if self.allow_requantize:
            args.append("--allow-requantize")
        if self.threads:
            args += ["--threads", str(self.threads)]
        if self.out:
            args += ["--out", self.out]
        return args


def outcome_lines(outcome: JobResult) -> list[str]:
    """One rich-text line per file a job made: type, name, size, time."""
    return [
        f"<b>{o.type}</b>  {o.path.name}  ·  {human_bytes(o.size_bytes)}  ·  {o.seconds:.1f} s"
        for o in outcome.outputs
    ]


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = (JobState.QUEUED, JobState.RUNNING)


def progress_status(event: ProgressEvent) -> str:
    """'Quantising Q8_0: 40/272' (the type comes from the message's '[Q8_0]' tag)."""
    message = event.message
    tag = ""
    if message.startswith("[") and "]" in message:
        tag = " " + message[1 : message.index("]")]
    what = STAGE_TEXT.get(event.stage, event.stage.capitalize())
    return f"{what}{tag}: {event.done}/{event.total}"


@dataclass(eq=False)
class QuantizeJob:
    """One job and what its card shows: status line, bar (``done`` of ``total``; a total of
    0 is a busy bar) and, once done, what it made."""

    options: QuantizeOptions
    state: JobState = JobState.QUEUED
    status: str = "Queued"
    done: int = 0
    total: int = 1
    outcome: JobResult | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def set_state(self, state: JobState, status: str) -> None:
        self.state = state
        self.status = status


class QuantizeQueue:
    """The jobs in the order they were asked for; one runs at a time."""

    def __init__(self) -> None:
        self.items: list[QuantizeJob] = []

    @property
    def running(self) -> QuantizeJob | None:
        return next((j for j in self.items if j.state is JobState.RUNNING), None)

    def add(self, options: QuantizeOptions) -> QuantizeJob:
        job = QuantizeJob(options)
        self.items.append(job)
        return job

    def start_next(self) -> QuantizeJob | None:
        """The next queued job, now marked as starting; ``None`` while one runs."""
        if self.running is not None:
            return None
        job = next((j for j in self.items if j.state is JobState.QUEUED), None)
        if job is not None:
            job.set_state(JobState.RUNNING, "Starting…")
            job.done, job.total = 0, 0
        return job

    def cancel(self, job: QuantizeJob) -> bool:
        """Cancel ``job``; True when it runs and its process must be told to stop."""
        if job.state is JobState.QUEUED:
            job.set_state(JobState.CANCELLED, "Cancelled before it started.")
            return False
        if job.state is JobState.RUNNING:
            job.status = "Cancelling…"
            return True
        return False

    # -- what the running job reports ------------------------------------------------------
    def progressed(self, job: QuantizeJob, event: ProgressEvent) -> None:
        job.total = max(1, event.total)
        job.done = min(event.done, job.total)
        job.status = progress_status(event)

    def succeeded(self, job: QuantizeJob, payload: dict[str, Any]) -> None:
        outcome = JobResult.model_validate(payload)
        job.outcome = outcome
        note = f"Done: {len(outcome.outputs)} file(s) added to the library."
        if outcome.warnings:
            note += f" {len(outcome.warnings)} warning(s) in the log."
        job.set_state(JobState.DONE, note)
        job.done = job.total = 1

    def failed(self, job: QuantizeJob, message: str, cancelled: bool) -> None:
        if cancelled:
            job.set_state(JobState.CANCELLED, "Cancelled; no partial files were kept.")
        else:
            job.set_state(JobState.FAILED, f"Failed: {message}")
        job.done, job.total = 0, 1
