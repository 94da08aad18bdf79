"""Models page: library listing, Hub search with fit badges, a download into the library,
cancel and resume, delete with confirmation, and the offline state."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QTableWidget
from pytestqt.qtbot import QtBot

from app.page_models.download_queue import DownloadState
from app.pages.models_page import ModelsPage
from app.storage.app_settings import AppSettings
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
    qtbot.waitUntil(lambda: bool(page.library.entries), timeout=20_000)
    return page


def _text(table: QTableWidget, row: int, col: int) -> str:
    item = table.item(row, col)
    assert item is not None
    return item.text()


def _names(page: ModelsPage) -> list[str]:
    table = page.library.table
    return [_text(table, r, 0) for r in range(table.rowCount())]


def test_library_lists_embedded_model_which_cannot_be_deleted(
    qtbot: QtBot, settings: AppSettings
) -> None:
    page = _page(qtbot, settings)
    assert _names(page) == [DEFAULT_MODEL_ID]
    library = page.library
    assert _text(library.table, 0, 1) == "Q4_1"
    assert _text(library.table, 0, 6) == "8,192"
    library.table.selectRow(0)
    assert library.reveal_button.isEnabled()
    assert not library.delete_button.isEnabled()
    opened: list[QUrl] = []
    library.open_url = opened.append
    library.reveal_selected()
    assert opened and Path(opened[0].toLocalFile()).is_dir()
    page.shutdown()


def test_offline_search_says_so_and_library_still_works(
    qtbot: QtBot, settings: AppSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    page = _page(qtbot, settings)
    tab = page.hub
    tab.search_edit.setText("smollm2")
    tab.search_button.click()  # disabled until the search answers
    qtbot.waitUntil(tab.search_button.isEnabled, timeout=20_000)
    assert page.banner.isVisibleTo(page)
    text = page.banner.label.text()
    assert "not reachable" in text and "library still works" in text
    assert tab.results_list.count() == 0
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
    tab = page.hub
    page.tabs.setCurrentIndex(1)
    tab.search_edit.setText("SmolLM2")
    tab.search_button.click()  # disabled until the search answers
    qtbot.waitUntil(tab.search_button.isEnabled, timeout=20_000)
    repos = [
        tab.results_list.item(i).text().split("\n")[0] for i in range(tab.results_list.count())
    ]
    assert GGUF_REPO in repos
    tab.results_list.setCurrentRow(repos.index(GGUF_REPO))
    qtbot.waitUntil(lambda: tab.fit_note.text().startswith("Fit:"), timeout=30_000)
    table = tab.files_table
    assert [_text(table, r, 0) for r in range(table.rowCount())] == [GGUF_FILE]
    assert _text(table, 0, 1) == "Q4_1"
    badge = tab.badge(0)
    assert badge is not None
    # a 98 MB model with a 1024-token context fits any machine that runs these tests
    assert badge.verdict == "fits", badge.toolTip()
    assert badge.text() == "Fits"

    # cancel mid-way, then resume: the download continues from the partial bytes
    hub.throttle_s_per_chunk = 0.05
    tab.download_button.click()
    row = tab.download_list.rows[0]
    download = row.download
    assert tab.downloads.items == [download]
    qtbot.waitUntil(lambda: row.bar.value() > 0, timeout=20_000)
    row.action.click()  # Cancel
    qtbot.waitUntil(lambda: tab.download_worker is None, timeout=60_000)
    assert download.state is DownloadState.CANCELLED
    assert row.action.text() == "Resume"
    hub.throttle_s_per_chunk = 0.0
    row.action.click()  # Resume
    qtbot.waitUntil(lambda: tab.download_worker is None, timeout=60_000)
    assert download.state is DownloadState.DONE, row.status.text()
    assert row.status.text().startswith("In the library") and row.bar.value() == row.bar.maximum()
    ranges = [r for r in hub.ranges_requested("") if r]
    assert any(r.startswith("bytes=") and not r.startswith("bytes=0-") for r in ranges), ranges
    # the finished download tells the library, which reads itself again
    qtbot.waitUntil(lambda: len(page.library.entries) == 2, timeout=20_000)
    want = f"{GGUF_REPO.replace('/', '--')}/{GGUF_FILE[:-5]}"
    assert want in _names(page)
    downloaded = Path(next(e.path for e in page.library.entries if e.name == want))
    assert (
        hashlib.sha256(downloaded.read_bytes()).digest()
        == hashlib.sha256(smollm2_path.read_bytes()).digest()
    )
    r = _names(page).index(want)
    assert _text(page.library.table, r, 7) == GGUF_REPO

    # delete asks first; "no" keeps the file, "yes" removes it
    page.tabs.setCurrentIndex(0)
    library = page.library
    assert library.select_path(str(downloaded))
    assert library.delete_button.isEnabled()
    asked: list[str] = []

    def refuse(title: str, text: str) -> bool:
        asked.append(text)
        return False

    library.confirm = refuse
    library.delete_selected()
    assert asked and downloaded.is_file()
    library.confirm = lambda title, text: True
    library.delete_selected()
    assert not downloaded.exists()
    qtbot.waitUntil(lambda: _names(page) == [DEFAULT_MODEL_ID], timeout=20_000)
    page.shutdown()
