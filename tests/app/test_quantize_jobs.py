"""The Quantise page's jobs, without Qt: the command line the real CLI accepts, the source
notes, one job at a time, cancel, and what a card says from the job's typed events."""

from __future__ import annotations

from pathlib import Path

from app.page_models.quantize_jobs import (
    JobState,
    QuantizeOptions,
    QuantizeQueue,
    SourceKind,
    form_note,
    outcome_lines,
    progress_status,
    source_advice,
)
from backend.entrypoints.main import build_parser
from backend.hub.library import LibraryEntry, ModelFormat
from backend.jobs.events import ProgressEvent
from quantize.results import JobResult, QuantizeResult

MIB = 2**20


def _entry(file_type: str | None, fmt: ModelFormat = "gguf") -> LibraryEntry:
    return LibraryEntry(
        name="SmolLM2",
        path="/lib/SmolLM2.gguf",
        size_bytes=90 * MIB,
        format=fmt,
        architecture="llama",
        parameter_count=135_000_000,
        context_length=8192,
        file_type=file_type,
        bits_per_weight=None,
        has_chat_template=True,
        source="local",
        repo_id=None,
        removable=True,
    )


def test_arguments_are_accepted_by_the_real_cli() -> None:
    options = QuantizeOptions(
        "/m/model.gguf",
        ["Q8_0", "Q4_K_M"],
        calibration="/c.txt",
        allow_requantize=True,
        threads=3,
        out="/out",
    )
    parsed = build_parser().parse_args([*options.arguments(), "--progress-jsonl"])
    assert parsed.command == "quantize"
    assert parsed.source == "/m/model.gguf"
    assert parsed.types == ["Q8_0", "Q4_K_M"]
    assert str(parsed.calibration) == "/c.txt"
    assert parsed.allow_requantize and parsed.threads == 3 and str(parsed.out) == "/out"
    assert "--allow-requantize" not in QuantizeOptions("x", ["Q8_0"]).arguments()
    assert options.title == "model.gguf  →  Q8_0, Q4_K_M"
    assert options.remembered() == {
        "types": ["Q8_0", "Q4_K_M"],
        "calibration": "/c.txt",
        "threads": 3,
    }


def test_a_quantised_source_ticks_requantise_and_says_why() -> None:
    quantised = source_advice(SourceKind.LIBRARY, _entry("Q4_1"))
    assert quantised.requantize is True and "already quantised (Q4_1)" in quantised.note
    assert source_advice(SourceKind.LIBRARY, _entry("BF16")).requantize is False
    assert source_advice(SourceKind.LIBRARY, _entry("BF16")).note == ""
    hf = source_advice(SourceKind.LIBRARY, _entry(None, "safetensors"))
    assert hf.requantize is False and "converted to F16 GGUF once" in hf.note
    assert source_advice(SourceKind.LIBRARY, None).requantize is None  # left as it is
    assert "downloaded into the library" in source_advice(SourceKind.REPO, None).note
    assert "converted to an F16 GGUF" in source_advice(SourceKind.FOLDER, None).note
    assert [k.label for k in SourceKind] == ["Library model", "Hugging Face folder", "Hub repo id"]


def test_the_form_says_what_is_missing_or_where_files_go() -> None:
    assert form_note("", [], "/lib") == (
        False,
        "To start: choose a source and tick at least one type.",
    )
    assert form_note("/m.gguf", [], "/lib") == (False, "To start: tick at least one type.")
    assert form_note("/m.gguf", ["Q8_0"], "/lib") == (True, "Files are written to /lib.")


def test_progress_names_the_step_and_the_type() -> None:
    event = ProgressEvent(
        stage="quantize", done=40, total=272, message="[Q8_0] blk.3.attn_q", phase=1, phases=2
    )
    assert progress_status(event) == "Quantising Q8_0: 40/272"
    convert = ProgressEvent(stage="convert", done=3, total=30, message="token_embd")
    assert progress_status(convert) == "Converting to GGUF: 3/30"
    assert progress_status(ProgressEvent(stage="verify", done=1, total=2)) == "Verify: 1/2"


def test_one_job_runs_at_a_time_and_reports_what_it_made() -> None:
    queue = QuantizeQueue()
    first = queue.add(QuantizeOptions("/m.gguf", ["Q8_0"]))
    second = queue.add(QuantizeOptions("/m.gguf", ["Q4_0"]))
    assert first.status == "Queued" and (first.done, first.total) == (0, 1)
    assert queue.start_next() is first
    assert first.state is JobState.RUNNING and first.status == "Starting…"
    assert first.total == 0  # a busy bar until the first event
    assert queue.start_next() is None
    queue.progressed(
        first, ProgressEvent(stage="quantize", done=300, total=272, message="[Q8_0] x")
    )
    assert (first.done, first.total) == (272, 272) and first.status.startswith("Quantising")
    made = QuantizeResult(
        path=Path("/lib/m-Q8_0.gguf"),
        sidecar=Path("/lib/m-Q8_0.gguf.json"),
        source=Path("/m.gguf"),
        type="Q8_0",
        size_bytes=145 * MIB,
        seconds=2.25,
        n_tensors=272,
        imatrix=None,
    )
    # the result event as ``quantdesk quantize --progress-jsonl`` sends it
    payload = JobResult(outputs=[made], warnings=["a tensor fell back to Q8_0"]).model_dump(
        mode="json"
    )
    queue.succeeded(first, payload)
    assert first.state is JobState.DONE and not first.active
    assert first.status == "Done: 1 file(s) added to the library. 1 warning(s) in the log."
    assert (first.done, first.total) == (1, 1)
    assert first.outcome is not None
    assert first.outcome.outputs == [made]
    assert outcome_lines(first.outcome) == ["<b>Q8_0</b>  m-Q8_0.gguf  ·  145.0 MiB  ·  2.2 s"]
    assert queue.start_next() is second


def test_cancel_a_queued_job_at_once_a_running_one_through_its_process() -> None:
    queue = QuantizeQueue()
    running = queue.add(QuantizeOptions("/m.gguf", ["Q8_0"]))
    waiting = queue.add(QuantizeOptions("/m.gguf", ["Q4_0"]))
    queue.start_next()
    assert queue.cancel(waiting) is False
    assert waiting.state is JobState.CANCELLED and waiting.status == "Cancelled before it started."
    assert queue.cancel(running) is True  # the caller stops the process
    assert running.status == "Cancelling…" and running.active
    queue.failed(running, "Cancelled.", cancelled=True)
    assert running.state is JobState.CANCELLED
    assert running.status == "Cancelled; no partial files were kept."
    assert queue.cancel(running) is False and queue.running is None
    failing = queue.add(QuantizeOptions("/m.gguf", ["Q2_K"]))
    assert queue.start_next() is failing
    queue.failed(failing, "disk full", cancelled=False)
    assert failing.state is JobState.FAILED and failing.status == "Failed: disk full"
    assert (failing.done, failing.total) == (0, 1)
