"""The Server page's speculative-decoding row: off, n-gram lookup or a draft model, written
into serve's own knobs; the draft picker is the model picker again, fed by its library scan;
a draft model with another vocabulary stops serve with a message the page shows."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.page_models.server_errors import explain_exit
from app.page_models.speculative_choice import SPEC_CHOICES, spec_mode, spec_update
from app.pages.server_page import ServerPage
from app.storage.app_settings import AppSettings, ServerKnobs
from tests.engine.test_speculative import _renamed, _vocab_variant


def test_each_choice_sets_serves_knobs_and_says_what_it_does() -> None:
    assert [c.label for c in SPEC_CHOICES] == ["off", "n-gram (prompt lookup)", "draft model"]
    assert all(c.tooltip and "\n" not in c.tooltip for c in SPEC_CHOICES)
    assert "repeats the prompt" in SPEC_CHOICES[1].tooltip
    assert "vocabulary" in SPEC_CHOICES[2].tooltip
    saved = ServerKnobs()
    assert spec_mode(saved) == "ngram"  # the default: n-gram drafting, verified as far as it pays
    assert spec_update(saved, "off", "/d.gguf") == {"spec_type": "none", "model_draft": None}
    assert spec_update(saved, "ngram", "/d.gguf") == {
        "spec_type": "ngram-simple",
        "model_draft": None,
    }
    assert spec_update(saved, "draft", "/d.gguf") == {
        "spec_type": "draft-simple",
        "model_draft": "/d.gguf",
    }
    # serve reads a draft model alone as draft-simple, and so does the page
    assert spec_mode(ServerKnobs(model_draft="/d.gguf")) == "draft"
    both = ServerKnobs(spec_type="ngram-simple,draft-simple", model_draft="/d.gguf")
    assert spec_mode(both) == "draft"  # a hand-written list survives while the choice stays
    assert spec_update(both, "draft", "/e.gguf")["spec_type"] == "ngram-simple,draft-simple"
    assert spec_mode(ServerKnobs(spec_type="ngram-simple")) == "ngram"


def _server_page(window: MainWindow) -> ServerPage:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    return page


def _drafting_rows_shown(page: ServerPage) -> bool:
    return page.draft_picker.isVisibleTo(page) and page.draft_spin.isVisibleTo(page)


def test_the_row_turns_speculation_on_and_off_and_keeps_the_draft(
    window: MainWindow,
    qtbot: QtBot,
    settings: AppSettings,
    isolated_home: Path,
    smollm2_path: Path,
) -> None:
    page = _server_page(window)
    draft = page.draft_picker
    assert page.spec_mode() == "ngram" and not _drafting_rows_shown(page)  # the default

    library = isolated_home / "models"
    library.mkdir(exist_ok=True)
    small = library / "Small-Q4_1.gguf"
    small.symlink_to(smollm2_path)
    window.show_page("chat")
    qtbot.waitUntil(lambda: not page.model_picker.is_scanning(), timeout=30_000)
    scans = draft.scans
    window.show_page("server")  # the model picker re-reads the library and hands it over
    qtbot.waitUntil(lambda: draft.scans > scans, timeout=30_000)
    assert not draft.is_scanning()  # the draft picker never reads the library itself
    assert draft.combo.findData(str(small)) >= 0

    page.set_spec_mode("draft")
    assert _drafting_rows_shown(page)
    assert settings.server.spec_types == ("draft-simple",)
    assert settings.server.model_draft == "default"  # the embedded model, first in the list
    draft.combo.setCurrentIndex(draft.combo.findData(str(small)))
    page.draft_spin.setValue(4)
    assert (settings.server.model_draft, settings.server.draft_max) == (str(small), 4)
    assert "135 M params" in draft.info.text()
    assert page.model_picker.value() == "default"  # the served model stays

    page.set_spec_mode("ngram")
    assert not _drafting_rows_shown(page)
    assert (settings.server.spec_types, settings.server.model_draft) == (("ngram-simple",), None)
    page.set_spec_mode("off")
    assert (settings.server.spec_types, settings.server.model_draft) == ((), None)
    assert settings.server.draft_max == 4

    # the draft picked last is kept while speculation is off, in this window and the next
    reopened = MainWindow(settings)
    reopened.confirm_close = False
    qtbot.addWidget(reopened)
    again = _server_page(reopened)
    assert again.spec_mode() == "off" and again.draft_picker.value() == str(small)
    page.set_spec_mode("draft")
    assert settings.server.model_draft == str(small)
    reopened.close()


def test_the_engines_refusal_of_a_draft_reads_as_one_message() -> None:
    tail = [
        "INFO backend.engine.model_runtime: loaded SmolLM2-135M-Instruct.Q4_1.gguf: llama",
        "ERROR backend.server.app_factory: model load failed: the draft model bloom.gguf "
        "cannot draft for SmolLM2.gguf: token 1000 differs (target '()', draft 'x'); "
        "speculative decoding needs a draft model with the same tokenizer",
        "quantdesk: error: the draft model bloom.gguf cannot draft for SmolLM2.gguf: token "
        "1000 differs (target '()', draft 'x'); speculative decoding needs a draft model "
        "with the same tokenizer",
    ]
    error = explain_exit(tail, 1, crashed=False)
    assert error.kind == "bad_draft"  # not "oom", though the name holds "oom"
    assert str(error).startswith("The draft model bloom.gguf cannot draft for SmolLM2.gguf: ")
    assert str(error).endswith("or turn speculative decoding off.")


@pytest.mark.model  # serve loads SmolLM2 before it reads the draft's vocabulary
def test_a_draft_with_another_vocabulary_stops_the_server_with_the_reason(
    window: MainWindow, qtbot: QtBot, tmp_path: Path
) -> None:
    bad = _vocab_variant(tmp_path / "other-vocab.gguf", {"tokenizer.ggml.tokens": _renamed})
    page = _server_page(window)
    page.set_spec_mode("draft")
    page.draft_picker.choose(str(bad))  # what "Open…" does with the chosen file
    server = window.context.server
    with qtbot.waitSignal(server.server_crashed, timeout=120_000) as crashed:
        qtbot.mouseClick(page.status.start_button, Qt.MouseButton.LeftButton)
    message = str(crashed.args[0])
    assert "The draft model other-vocab.gguf cannot draft for SmolLM2" in message
    assert "token 1000 differs" in message and "turn speculative decoding off" in message
    assert server.last_error is not None and server.last_error.kind == "bad_draft"
    assert page.status.state_label.text() == "Could not start"
    assert page.banner.isVisibleTo(page) and page.banner.label.text() == message
