"""The Server page offers the embedded model, the hub library and recently opened files."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.pages.server_page import ServerPage


def test_library_and_recent_models_are_offered(
    window: MainWindow, qtbot: QtBot, isolated_home: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    picker = page.model_picker
    assert picker.combo.itemData(0) == "default"
    assert "SmolLM2" in picker.combo.itemText(0)
    assert "135 M params" in picker.info.text() and "Q4_1" in picker.info.text()

    library = isolated_home / "models"
    library.mkdir(exist_ok=True)
    (library / "Linked-Q4_1.gguf").symlink_to(smollm2_path)
    outside = tmp_path / "Elsewhere.gguf"
    outside.symlink_to(smollm2_path)

    window.show_page("chat")
    qtbot.waitUntil(lambda: not picker.is_scanning(), timeout=30_000)
    scans = picker.scans
    window.show_page("server")  # showing the page re-reads the library, in a thread
    qtbot.waitUntil(lambda: picker.scans > scans, timeout=30_000)
    values = [picker.combo.itemData(i) for i in range(picker.combo.count())]
    assert str(library / "Linked-Q4_1.gguf") in values

    page.set_model(str(outside))  # what "Open GGUF…" does with the chosen file
    assert picker.combo.currentData() == str(outside)
    assert window.settings.server.model == str(outside)
    assert window.settings.recent_models[0] == str(outside)
    assert "30 layers" in picker.info.text()
    assert page.ngl_spin.maximum() == 30
    assert (
        "Elsewhere" in page.endpoint.snippet_edits[1].toPlainText()
    )  # curl snippet names the model


def test_any_page_can_ask_to_serve_a_model(
    window: MainWindow, smollm2_path: Path, tmp_path: Path
) -> None:
    target = tmp_path / "Picked.gguf"
    target.symlink_to(smollm2_path)
    window.show_page("chat")
    window.serve_model(str(target))
    page = window.page("server")
    assert isinstance(page, ServerPage)
    assert window.stack.currentWidget() is page
    assert page.model_picker.combo.currentData() == str(target)
    assert page.knobs().model == str(target)
