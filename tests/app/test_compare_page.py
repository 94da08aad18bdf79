"""Compare page: a real (tiny) comparison from the GUI fills the table, plot and answers;
cancel stops the child; the report exports; the last run is shown again on reopening."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.page_models.compare_runs import RESULT_COLUMNS, CompareOptions, Outcome
from app.pages.compare_page import ComparePage
from app.storage.app_settings import AppSettings
from backend.entrypoints.main import build_parser
from backend.hub.library import ModelLibrary
from tests.jobs.cli_child import start_quantdesk


def _page(qtbot: QtBot, settings: AppSettings) -> ComparePage:
    page = ComparePage(settings)
    qtbot.addWidget(page)
    page.resize(1240, 860)
    page.show()
    qtbot.waitUntil(lambda: bool(page.entries), timeout=20_000)
    return page


def _make_q8_0(source: Path) -> Path:
    """A second model in the library: SmolLM2 re-quantised to Q8_0 by the real CLI."""
    out = ModelLibrary().root
    args = ("--type", "Q8_0", "--allow-requantize", "--out", str(out), "--threads", "2")
    proc = start_quantdesk("quantize", str(source), *args)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out / "SmolLM2-135M-Instruct-Q8_0.gguf"


def _text(tmp_path: Path) -> Path:
    text = tmp_path / "eval.txt"
    text.write_text(
        "A quantised model stores its weights with fewer bits. The question is how much of "
        "the original model's behaviour survives, token by token, on ordinary text. " * 30,
        encoding="utf-8",
    )
    return text


def test_arguments_are_accepted_by_the_real_cli(tmp_path: Path) -> None:
    args = CompareOptions(
        "/r.gguf",
        ["/a.gguf", "/b.gguf"],
        text="/t.txt",
        prompts=["What is 2+2?", "Name a colour."],
        ctx=64,
        chunks=3,
        answers=True,
        speed=False,
        threads=2,
    ).arguments(tmp_path)
    parsed = build_parser().parse_args([*args, "--progress-jsonl"])
    assert parsed.command == "compare"
    assert str(parsed.reference) == "/r.gguf"
    assert [str(c) for c in parsed.candidates] == ["/a.gguf", "/b.gguf"]
    assert parsed.ctx == 64 and parsed.chunks == 3 and parsed.no_speed and not parsed.no_answers
    assert parsed.json == tmp_path / "results.json" and parsed.report == tmp_path / "report.html"
    assert parsed.prompts.read_text(encoding="utf-8") == "What is 2+2?\nName a colour.\n"
    assert "--chunks" not in CompareOptions("/r", ["/a"]).arguments(tmp_path)


def test_empty_state_until_a_candidate_is_ticked(qtbot: QtBot, settings: AppSettings) -> None:
    page = _page(qtbot, settings)
    assert page.results.stack.currentWidget() is page.results.empty
    assert page.candidate_list.count() == 0  # only the embedded model: nothing to compare
    assert not page.run_button.isEnabled()
    assert not page.results.export_button.isEnabled()
    page.shutdown()


@pytest.mark.slow
def test_compare_run_fills_table_plot_and_answers(
    qtbot: QtBot, settings: AppSettings, smollm2_path: Path, tmp_path: Path
) -> None:
    q8 = _make_q8_0(smollm2_path)
    page = _page(qtbot, settings)
    qtbot.waitUntil(lambda: len(page.entries) == 2, timeout=20_000)
    # the highest-precision file is offered as the reference
    assert page.reference_combo.currentData() == str(q8)
    page.set_candidates([str(smollm2_path)])
    assert page.checked_candidates() == [str(smollm2_path)]
    page.text_edit.setText(str(_text(tmp_path)))
    page.prompts_edit.setPlainText("What is 2+2?")
    page.ctx_spin.setValue(64)
    page.chunks_spin.setValue(2)
    page.speed_check.setChecked(False)
    page.threads_spin.setValue(2)
    assert page.run_button.isEnabled()
    seen: list[int] = []
    page.progress.valueChanged.connect(seen.append)
    page.run_button.click()
    assert page.cancel_button.isEnabled() and not page.run_button.isEnabled()
    qtbot.waitUntil(lambda: page.job is None, timeout=300_000)
    assert page.run is not None
    assert page.run.outcome is Outcome.DONE, page.results.log_view.toPlainText()[-3000:]
    assert any(0 < v < 1000 for v in seen)  # progress moved before the end

    results = page.results
    table = results.table
    assert table.rowCount() == 2
    heads = [table.horizontalHeaderItem(c) for c in range(table.columnCount())]
    assert [h.text() for h in heads if h is not None] == list(RESULT_COLUMNS)
    header = {RESULT_COLUMNS[c]: c for c in range(len(RESULT_COLUMNS))}

    def cell(row: int, name: str) -> str:
        item = table.item(row, header[name])
        assert item is not None
        return item.text()

    assert "SmolLM2-135M-Instruct-Q8_0" in cell(0, "Model")
    assert cell(1, "Model") == "SmolLM2-135M-Instruct.Q4_1"
    data = json.loads((page.run.folder / "results.json").read_text())
    cand = data["candidates"][0]
    assert float(cell(1, "KLD")) == pytest.approx(cand["kld_mean"], abs=1e-5)
    assert 0 < cand["kld_mean"] < 1
    assert float(cell(1, "PPL ratio")) == pytest.approx(cand["ppl_ratio"], abs=1e-3)
    assert float(cell(1, "Same top %")) == pytest.approx(cand["same_top_pct"], abs=0.05)
    assert math.isfinite(float(cell(1, "PPL"))) and float(cell(1, "bpw")) < float(cell(0, "bpw"))
    assert results.plotted_points() == 1
    # answers side by side: one column per model, the real replies
    assert len(results.answer_views) == 2
    assert results.answer_texts() == [
        data["answers"][0]["reference"],
        data["answers"][0]["candidates"][0],
    ]
    assert all(t.strip() for t in results.answer_texts())

    out = tmp_path / "exported.html"
    page.pick_save = lambda title, suggested: str(out)
    assert results.export_button.isEnabled()
    assert page.export_report() == str(out)
    assert "SmolLM2-135M-Instruct.Q4_1" in out.read_text(encoding="utf-8")
    page.shutdown()

    # a new page (the app reopened) shows the last run again
    again = _page(qtbot, settings)
    assert again.results.table.rowCount() == 2 and again.results.plotted_points() == 1
    again.shutdown()


def test_cancel_stops_the_comparison(
    qtbot: QtBot, settings: AppSettings, smollm2_path: Path, tmp_path: Path
) -> None:
    page = _page(qtbot, settings)
    # compare the embedded model with a copy of itself under another name
    copy = ModelLibrary().root / "copy" / "SmolLM2-copy.gguf"
    copy.parent.mkdir(parents=True)
    copy.write_bytes(smollm2_path.read_bytes())
    page.refresh_library()
    qtbot.waitUntil(lambda: len(page.entries) == 2, timeout=20_000)
    page.set_reference(str(smollm2_path))
    page.set_candidates([str(copy)])
    page.text_edit.setText(str(_text(tmp_path)))
    page.ctx_spin.setValue(64)
    page.chunks_spin.setValue(0)
    page.threads_spin.setValue(1)
    page.start()
    qtbot.waitUntil(lambda: "Reference" in page.status.text(), timeout=60_000)
    page.cancel_button.click()
    qtbot.waitUntil(lambda: page.job is None, timeout=60_000)
    assert page.run is not None and page.run.outcome is Outcome.CANCELLED
    assert page.status.text() == "Cancelled."
    assert page.run_button.isEnabled() and not page.cancel_button.isEnabled()
    assert page.results.stack.currentWidget() is page.results.empty
    page.shutdown()
