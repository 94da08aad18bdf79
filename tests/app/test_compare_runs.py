"""The Compare page's runs, without Qt: folders, the last run, typed results, the table's and
plot's numbers, and the progress line from the job protocol's numeric phase."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.page_models.compare_runs import (
    Band,
    CompareRun,
    Outcome,
    kld_plot,
    progress_fraction,
    progress_status,
    result_rows,
    short_names,
    summary_text,
)
from backend.compare.results import Answer, CandidateResult, CompareResult, ReferenceResult
from backend.jobs.events import ProgressEvent

MIB = 2**20


def _facts(name: str, size_mib: float) -> dict[str, Any]:
    return {
        "path": f"/lib/{name}.gguf",
        "name": name,
        "size_bytes": int(size_mib * MIB),
        "n_params": 135_000_000,
        "bpw": 8 * size_mib * MIB / 135e6,
        "load_s": 0.1,
        "prompt_tok_s": 900.0,
        "gen_tok_s": 120.0,
    }


def _result() -> CompareResult:
    return CompareResult(
        reference=ReferenceResult(**_facts("SmolLM2-Q8_0", 138.0), ppl=12.3456),
        candidates=[
            CandidateResult(**_facts("SmolLM2-Q4_K_M", 100.0), kld_mean=0.0123, ppl_ratio=1.02),
            CandidateResult(**_facts("SmolLM2-Q2_K", 60.0), kld_mean=0.25),
            CandidateResult(**_facts("SmolLM2-Q8_0-copy", 138.0)),
        ],
        answers=[Answer("2+2?", "4", ["4", "5", "4"])],
        settings={"scored_tokens": 4096, "n_ctx": 512},
    )


def test_each_run_gets_its_own_folder(tmp_path: Path) -> None:
    first = CompareRun.create(tmp_path)
    second = CompareRun.create(tmp_path)  # the same second: a suffix
    assert first.folder.is_dir() and second.folder.is_dir()
    assert first.folder != second.folder and second.folder.name.startswith(first.folder.name)
    assert first.outcome is None and first.report is None


def test_the_last_run_is_the_remembered_one_or_the_newest_with_results(tmp_path: Path) -> None:
    assert CompareRun.last(None, tmp_path) is None
    old, new, empty = (tmp_path / n for n in ("20240101-000000", "20250101-000000", "20260101"))
    for folder in (old, new):
        folder.mkdir()
        (folder / "results.json").write_text(json.dumps(_result().to_json()), encoding="utf-8")
    empty.mkdir()  # a run that never finished: no results
    newest = CompareRun.last(None, tmp_path)
    assert newest is not None and newest.folder == new and newest.outcome is Outcome.DONE
    assert newest.result is not None and newest.result.candidates[1].name == "SmolLM2-Q2_K"
    remembered = CompareRun.last(str(old), tmp_path)
    assert remembered is not None and remembered.folder == old
    assert CompareRun.last(str(empty), tmp_path) is None
    (new / "results.json").write_text("[]", encoding="utf-8")
    with pytest.raises(TypeError):
        CompareRun.last(str(new), tmp_path)


def test_a_result_event_becomes_typed_results_and_gate_failures(tmp_path: Path) -> None:
    run = CompareRun.create(tmp_path)
    payload = {**_result().to_json(), "outputs": {}, "gate_failures": ["Q2_K: KLD 0.25 > 0.1"]}
    run.finished(payload)
    assert run.outcome is Outcome.DONE and run.gate_failures == ["Q2_K: KLD 0.25 > 0.1"]
    assert run.result is not None
    assert math.isnan(run.result.candidates[2].kld_mean)  # null in JSON: not measured


def test_progress_reads_the_numeric_phase() -> None:
    ref = ProgressEvent(stage="reference", done=2, total=8, message="q8.gguf", phase=0, phases=4)
    cand = ProgressEvent(
        stage="candidate 2/3", done=4, total=8, message="q4.gguf", phase=2, phases=4
    )
    answers = ProgressEvent(
        stage="answers", done=0, total=1, message="q4: speed", phase=2, phases=4
    )
    assert progress_fraction(ref) == pytest.approx(2 / 8 / 4)
    assert progress_fraction(cand) == pytest.approx((2 + 0.5) / 4)
    assert progress_fraction(answers) is None  # the bar holds
    assert progress_status(ref) == "Reference 2/8  ·  q8.gguf"
    assert progress_status(cand) == "Candidate 2/3 4/8  ·  q4.gguf"
    assert progress_status(answers) == "Speed and answers  ·  q4: speed"


def test_table_rows_bands_and_summary() -> None:
    rows = result_rows(_result())
    assert [r.band for r in rows] == [Band.REFERENCE, Band.WARN, Band.BAD, None]
    ref, q4 = rows[0].texts, rows[1].texts
    assert ref[:2] == ["SmolLM2-Q8_0 (ref)", "138.0 MiB"] and ref[3] == "12.3456"
    assert q4[0] == "SmolLM2-Q4_K_M" and q4[1] == "100.0 MiB"
    assert q4[4] == "1.020" and q4[5] == "0.01230"
    assert rows[3].texts[5] == "–"  # not measured
    assert rows[1].cells[5].tip.startswith("p99 ")
    assert summary_text(_result()).startswith(
        "Reference SmolLM2-Q8_0: PPL 12.346 over 4,096 scored tokens, chunks of 512."
    )


def test_the_plot_shows_measured_candidates_by_short_name() -> None:
    plot = kld_plot(_result())
    assert [(p.label, p.series) for p in plot.points] == [("Q4_K_M", 0), ("Q2_K", 1)]
    assert plot.reference.label == "Q8_0 (reference)" and plot.reference.kld == 0.0
    lo, hi = plot.x_range
    assert lo < 60 < 138 < hi
    assert plot.y_top == pytest.approx(0.25 * 1.3)
    assert plot.label_to_the_right(plot.points[1]) and not plot.label_to_the_right(plot.reference)


def test_short_names_drop_the_shared_prefix() -> None:
    assert short_names(["SmolLM2-135M-Q8_0", "SmolLM2-135M-Q4_K_M"]) == ["Q8_0", "Q4_K_M"]
    assert short_names(["a", "b"]) == ["a", "b"]
    assert short_names(["only"]) == ["only"]
