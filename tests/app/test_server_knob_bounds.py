"""The Server page's knob widgets take their ranges and choices from ServerKnobs itself."""

from __future__ import annotations

from typing import get_args

import pytest
from annotated_types import Ge, Le

from app.main_window import MainWindow
from app.pages.server_page import ServerPage
from app.storage.app_settings import AppSettings, ServerKnobs
from backend.settings import EngineSettings
from backend.settings.engine_settings import ServingKnobs, SpeculativeKnobs


def _declared_bounds(name: str) -> tuple[object, object]:
    metadata = ServerKnobs.model_fields[name].metadata
    ge = next(m.ge for m in metadata if isinstance(m, Ge))
    le = next(m.le for m in metadata if isinstance(m, Le))
    return ge, le


def test_spin_ranges_are_the_models_bounds(window: MainWindow) -> None:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    bounded_ints = {
        name
        for name, field in ServerKnobs.model_fields.items()
        if field.annotation is int and any(isinstance(m, Le) for m in field.metadata)
    }
    # every bounded integer knob has a spin box but those the page leaves to serve's
    # defaults (kept at their saved values): the prefix cache, the n-gram lookup's sizes,
    # the shortest draft worth verifying and the draft model's GPU layers
    assert bounded_ints - set(page.knob_spins) == {
        "prefix_cache_entries",
        "spec_ngram_simple_size_n",
        "spec_ngram_simple_size_n_min",
        "spec_ngram_simple_size_m",
        "spec_ngram_simple_min_hits",
        "draft_min",
        "gpu_layers_draft",
    }
    assert "draft_max" in page.knob_spins  # "Draft tokens"
    for name, spin in page.knob_spins.items():
        ge, le = _declared_bounds(name)
        assert spin.minimum() == ge, name
        if name == "gpu_layers":  # narrowed to the picked model's layer count
            assert isinstance(le, int) and 0 < spin.maximum() <= le
        else:
            assert spin.maximum() == le, name
        spin.setValue(spin.maximum() + 1)  # the box clamps: no value the model refuses
        assert spin.value() == spin.maximum()
    ServerKnobs.model_validate(page.knobs().model_dump())

    for combo, name in (
        (page.ctk_combo, "cache_type_k"),
        (page.ctv_combo, "cache_type_v"),
        (page.fa_combo, "flash_attn"),
    ):
        offered = [combo.itemText(i) for i in range(combo.count())]
        assert offered == list(get_args(ServerKnobs.model_fields[name].annotation))


def test_knobs_the_page_does_not_show_keep_their_values(
    window: MainWindow, settings: AppSettings
) -> None:
    page = window.page("server")
    assert isinstance(page, ServerPage)
    hidden = {"prefix_cache_entries": 3, "draft_min": 2, "spec_ngram_simple_size_n": 6}
    settings.server = settings.server.model_copy(update=hidden)
    page.parallel_spin.setValue(3)  # a knob change writes the page's knobs back
    assert settings.server.parallel == 3
    assert settings.server.model_dump(include=set(hidden)) == hidden
    assert page.knobs().model_dump(include=set(hidden)) == hidden


@pytest.fixture
def nothing_saved(settings: AppSettings) -> AppSettings:
    """Server knobs as a first run has them (only the port is kept off 8080)."""
    settings.server = ServerKnobs(port=0)
    return settings


def test_a_fresh_page_shows_serves_defaults(nothing_saved: AppSettings, window: MainWindow) -> None:
    """With nothing saved the page starts what ``quantdesk serve`` starts: a KV stream per
    slot, -c 16384 -np 4 (4,096 tokens per request)."""
    page = window.page("server")
    assert isinstance(page, ServerPage)
    shown = page.knobs()
    served = EngineSettings()
    assert page.kv_layout_combo.currentText() == "per slot" and not shown.kv_unified
    for name in ServingKnobs.model_fields:
        if name not in ("model", "gpu_layers"):  # the picker's model; -ngl narrowed to it
            assert getattr(shown, name) == getattr(served, name), name
    assert (shown.ctx_size, shown.parallel) == (16384, 4)
    assert page.spec_mode() == "ngram" and not page.draft_picker.isVisibleTo(page)
    for name in SpeculativeKnobs.model_fields:
        assert getattr(shown, name) == getattr(served, name), name
