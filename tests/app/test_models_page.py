"""Models page: library listing, Hub search with fit badges, a download into the library,
cancel and resume, delete with confirmation, and the offline state."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QTableWidget
from pytestqt.qtbot import QtBot

from app.app_settings import AppSettings
from app.pages.models_page import ModelsPage
from backend.settings.default_model import DEFAULT_MODEL_ID
from tests.hub.conftest import (  # noqa: F401  (fixtures)
    GGUF_FILE,
    GGUF_REPO,
    hub,
    hub_server,
    tiny_safetensors,
)
from tests.hub.hub_stand_in import HubStandIn


def _page(qtbot: QtBot, settings: AppSettings) -> ModelsPage:
    page = ModelsPage(settings)
    qtbot.addWidget(page)
    page.resize(1240, 860)
    page.show()
    qtbot.waitUntil(lambda: bool(page.entries), timeout=20_000)
    return page


def _text(table: QTableWidget, row: int, col: int) -> str:
    item = table.item(row, col)
    assert item is not None
    return item.text()


def _names(page: ModelsPage) -> list[str]:
    return [_text(page.library_table, r, 0) for r in range(page.library_table.rowCount())]


def test_library_lists_embedded_model_which_cannot_be_deleted(
    qtbot: QtBot, settings: AppSettings
) -> None:
    page = _page(qtbot, settings)
    assert _names(page) == [DEFAULT_MODEL_ID]
    assert _text(page.library_table, 0, 1) == "Q4_1"
    assert _text(page.library_table, 0, 6) == "8,192"
    page.library_table.selectRow(0)
    assert page.reveal_button.isEnabled()
    assert not page.delete_button.isEnabled()
    opened: list[QUrl] = []
    page.open_url = opened.append
    page.reveal_selected()
    assert opened and Path(opened[0].toLocalFile()).is_dir()
    page.shutdown()


def test_offline_search_says_so_and_library_still_works(
    qtbot: QtBot, settings: AppSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    page = _page(qtbot, settings)
    page.search_edit.setText("smollm2")
    with qtbot.waitSignal(page.search_finished, timeout=20_000):
        page.search_button.click()
    assert page.banner.isVisibleTo(page)
    text = page.banner.label.text()
    assert "not reachable" in text and "library still works" in text
    assert page.results_list.count() == 0
    assert _names(page) == [DEFAULT_MODEL_ID]
    page.shutdown()


def test_search_download_appears_in_library_then_delete(
    qtbot: QtBot,
    settings: AppSettings,
    hub: HubStandIn,  # noqa: F811
    smollm2_path: Path,
    isolated_home: Path,
) -> None:
    page = _page(qtbot, settings)
    page.tabs.setCurrentIndex(1)
    page.search_edit.setText("SmolLM2")
    with qtbot.waitSignal(page.search_finished, timeout=20_000):
        page.search_button.click()
    repos = [
        page.results_list.item(i).text().split("\n")[0] for i in range(page.results_list.count())
    ]
    assert GGUF_REPO in repos
    with qtbot.waitSignal(page.fits_ready, timeout=30_000):
        page.results_list.setCurrentRow(repos.index(GGUF_REPO))
    table = page.files_table
    assert [_text(table, r, 0) for r in range(table.rowCount())] == [GGUF_FILE]
    assert _text(table, 0, 1) == "Q4_1"
    badge = page.badge(0)
    assert badge is not None
    # a 98 MB model with a 1024-token context fits any machine that runs these tests
    assert badge.verdict == "fits", badge.toolTip()
    assert badge.text() == "Fits"

    # cancel mid-way, then resume: the download continues from the partial bytes
    hub.throttle_s_per_chunk = 0.05
    with qtbot.waitSignal(page.download_finished, timeout=60_000) as finished:
        page.download_button.click()
        row = page.downloads[0]
        qtbot.waitUntil(lambda: row.bar.value() > 0, timeout=20_000)
        row.action.click()  # Cancel
    assert finished.args == ["cancelled"]
    assert row.action.text() == "Resume"
    hub.throttle_s_per_chunk = 0.0
    with qtbot.waitSignals([page.download_finished, page.library_refreshed], timeout=60_000):
        row.action.click()  # Resume
    assert row.state == "done", row.status.text()
    ranges = [r for r in hub.ranges_requested("") if r]
    assert any(r.startswith("bytes=") and not r.startswith("bytes=0-") for r in ranges), ranges
    qtbot.waitUntil(lambda: len(page.entries) == 2, timeout=20_000)
    want = f"{GGUF_REPO.replace('/', '--')}/{GGUF_FILE[:-5]}"
    assert want in _names(page)
    downloaded = Path(next(e.path for e in page.entries if e.name == want))
    assert (
        hashlib.sha256(downloaded.read_bytes()).digest()
        == hashlib.sha256(smollm2_path.read_bytes()).digest()
    )
    r = _names(page).index(want)
    assert _text(page.library_table, r, 7) == GGUF_REPO

    # delete asks first; "no" keeps the file, "yes" removes it
    page.tabs.setCurrentIndex(0)
    assert page.select_library_path(str(downloaded))
    assert page.delete_button.isEnabled()
    asked: list[str] = []

    def refuse(title: str, text: str) -> bool:
        asked.append(text)
        return False

    page.confirm = refuse
    page.delete_selected()
    assert asked and downloaded.is_file()
    page.confirm = lambda title, text: True
    with qtbot.waitSignal(page.library_refreshed, timeout=20_000):
        page.delete_selected()
    assert not downloaded.exists()
    assert _names(page) == [DEFAULT_MODEL_ID]
    page.shutdown()
