"""The ``--progress-jsonl`` protocol: a real ``quantdesk compare`` child, read as CliJob does."""

from __future__ import annotations

import io
import signal
import subprocess
from pathlib import Path

import pytest

from backend.compare.results import CompareResult
from backend.jobs.errors import JobCancelledError, JobProtocolError
from backend.jobs.events import (
    ErrorEvent,
    JobEvent,
    ProgressEvent,
    ResultEvent,
    WarningEvent,
    parse_event,
)
from backend.jobs.job_session import JobSession
from backend.jobs.progress import Progress
from tests.jobs.cli_child import cancel_child, start_quantdesk


def _compare_child(model: Path, *extra: str) -> subprocess.Popen[str]:
    """``quantdesk compare`` with the model as reference and candidate."""
    return start_quantdesk(
        "compare",
        "--reference",
        str(model),
        str(model),
        "--no-answers",
        "--no-speed",
        "--threads",
        "1",
        "--progress-jsonl",
        *extra,
    )


@pytest.mark.model
def test_compare_child_events_parse_into_typed_phases_and_result(smollm2_path: Path) -> None:
    proc = _compare_child(smollm2_path, "--ctx", "64", "--chunks", "2")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    events = [parse_event(line) for line in out.splitlines()]
    # the embedded model is a Q4_1: a reference that is itself a low-bit quant is warned about
    assert isinstance(events[0], WarningEvent) and "Q4_1" in events[0].message
    progress = [e for e in events if isinstance(e, ProgressEvent)]
    assert {(p.stage, p.phase, p.phases) for p in progress} == {
        ("reference", 0, 2),
        ("candidate 1/1", 1, 2),
    }
    assert progress[-1].done == progress[-1].total and progress[-1].fraction == 1.0
    assert [p.fraction for p in progress] == sorted(p.fraction for p in progress)
    result = events[-1]
    assert isinstance(result, ResultEvent)
    assert result.payload["gate_failures"] == [] and result.payload["outputs"] == {}
    compared = CompareResult.from_json(result.payload)
    assert compared.candidates[0].name == compared.reference.name == smollm2_path.stem
    assert compared.candidates[0].kld_mean == pytest.approx(0.0, abs=1e-4)


@pytest.mark.model
def test_sigint_cancels_the_compare_child_with_the_cancelled_error_event(
    smollm2_path: Path,
) -> None:
    proc = _compare_child(smollm2_path, "--ctx", "256", "--batch", "256")
    assert proc.stdout is not None
    for line in proc.stdout:
        event = parse_event(line)
        if isinstance(event, ProgressEvent) and event.done >= 1:
            assert event.done < event.total  # it is mid-way, not finished
            break
    last, err = cancel_child(proc, signal.SIGINT)
    assert last == ErrorEvent(
        message="comparison cancelled", exit_code=130, error_type="CompareCancelledError"
    )
    assert "Traceback" not in err


def test_events_round_trip_through_their_json_lines() -> None:
    events: list[JobEvent] = [
        ProgressEvent.from_progress(Progress("candidate 2/3", 5, 10, "q.gguf", 640, 2, 4)),
        WarningEvent(message="careful"),
        ResultEvent(payload={"outputs": {"json": "r.json"}, "n": [1, 2.5, None]}),
        ErrorEvent(message="disk full", exit_code=4, error_type="OutputWriteError"),
    ]
    for event in events:
        assert parse_event(event.to_line()) == event
    # the result payload sits flat beside "type", as older readers expect
    assert (
        events[2].to_line()
        == '{"type": "result", "outputs": {"json": "r.json"}, "n": [1, 2.5, null]}'
    )
    assert events[0].fraction == pytest.approx((2 + 0.5) / 4)


@pytest.mark.parametrize(
    "line",
    ["not json", "[1, 2]", '{"type": "mystery"}', '{"type": "progress", "stage": "x"}', "{}"],
)
def test_parse_event_refuses_lines_that_are_not_events(line: str) -> None:
    with pytest.raises(JobProtocolError):
        parse_event(line)


def test_a_result_payload_cannot_shadow_the_type() -> None:
    with pytest.raises(ValueError, match="type"):
        ResultEvent(payload={"type": "other"})


def test_job_session_writes_the_exception_as_the_error_event_and_lets_it_propagate() -> None:
    stream = io.StringIO()
    with pytest.raises(JobCancelledError), JobSession(jsonl=True, stream=stream) as job:
        job.progress(Progress("quantize", 1, 3))
        raise JobCancelledError("quantisation cancelled")
    first, last = (parse_event(line) for line in stream.getvalue().splitlines())
    assert first == ProgressEvent(stage="quantize", done=1, total=3)
    assert last == ErrorEvent(
        message="quantisation cancelled", exit_code=130, error_type="JobCancelledError"
    )


def test_job_session_signals_set_cancel_and_are_restored_after() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with JobSession(jsonl=False) as job:
        signal.raise_signal(signal.SIGTERM)
        assert job.cancel.is_set()
    with pytest.raises(KeyboardInterrupt), JobSession(jsonl=False) as job:
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C asks the job to stop
        assert job.cancel.is_set()
        signal.raise_signal(signal.SIGINT)  # a second one stops it at once
    assert {sig: signal.getsignal(sig) for sig in before} == before
