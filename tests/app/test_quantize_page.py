"""Quantise page: a real job on the embedded SmolLM2 from the GUI, and cancel."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.pages.quantize_page import QuantizePage
from app.storage.app_settings import AppSettings
from backend.hub.library import ModelLibrary


def _page(qtbot: QtBot, settings: AppSettings) -> QuantizePage:
    page = QuantizePage(settings)
    qtbot.addWidget(page)
    page.resize(1240, 860)
    page.show()
    qtbot.waitUntil(lambda: bool(page.entries), timeout=20_000)
    return page


def _tick_only(page: QuantizePage, *names: str) -> None:
    for name, check in page.type_checks.items():
        check.setChecked(name in names)


def test_empty_state_and_start_needs_a_type(qtbot: QtBot, settings: AppSettings) -> None:
    page = _page(qtbot, settings)
    assert page.job_list.stack.currentWidget() is page.job_list.empty
    _tick_only(page)
    assert not page.start_button.isEnabled()
    assert "tick at least one type" in page.form_note.text()
    page.kind_combo.setCurrentIndex(2)  # Hub repo id, still empty
    assert "choose a source" in page.form_note.text()
    page.shutdown()


def test_requantise_smollm2_to_q8_0_lands_in_library(
    qtbot: QtBot, settings: AppSettings, smollm2_path: Path
) -> None:
    page = _page(qtbot, settings)
    assert page.select_library_path(str(smollm2_path))
    assert page.requant_check.isChecked()  # the source is already quantised (Q4_1)
    assert "already quantised" in page.source_note.text()
    _tick_only(page, "Q8_0")
    page.threads_spin.setValue(2)
    assert page.start_button.isEnabled()
    page.start_button.click()
    card = page.job_list.cards[0]
    assert page.job_list.stack.currentIndex() == 1
    qtbot.waitUntil(lambda: page.process is None, timeout=120_000)
    assert card.job.state == "done", card.status.text() + card.log.toPlainText()[-2000:]
    qtbot.waitUntil(lambda: any(e.file_type == "Q8_0" for e in page.entries), timeout=20_000)
    out = ModelLibrary().root / "SmolLM2-135M-Instruct-Q8_0.gguf"
    assert out.is_file() and out.stat().st_size > smollm2_path.stat().st_size
    assert "Q8_0" in card.outputs.text() and out.name in card.outputs.text()
    assert card.bar.value() == card.bar.maximum()
    assert "quantize" in card.log.toPlainText() or "Q8_0" in card.log.toPlainText()
    assert not card.cancel_button.isVisible()
    page.shutdown()


def test_cancel_keeps_no_partial_files(
    qtbot: QtBot, settings: AppSettings, smollm2_path: Path, tmp_path: Path
) -> None:
    page = _page(qtbot, settings)
    page.out_dir = str(tmp_path / "out")
    page.select_library_path(str(smollm2_path))
    types = ["Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0", "Q3_K_M"]
    _tick_only(page, *types)
    page.threads_spin.setValue(1)
    card = page.start()
    assert card is not None
    qtbot.waitUntil(lambda: card.status.text().startswith("Quantising"), timeout=60_000)
    card.cancel_button.click()
    qtbot.waitUntil(lambda: page.process is None, timeout=60_000)
    assert card.job.state == "cancelled"
    made = (
        sorted(p.name for p in (tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else []
    )
    assert not [m for m in made if m.endswith((".part", ".tmp"))], made
    assert len([m for m in made if m.endswith(".gguf")]) < len(types), made
    page.shutdown()
