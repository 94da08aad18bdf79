"""The Server page's stacked fit bars, without Qt or a server: each resident model of a
library server is a segment of its own (its size from ``/v1/models``, split between RAM and
VRAM by the GPU share), the chosen model about to load follows with its server process's
overhead, the reserve lies at the end of the free memory, and the plan says what the router
will do: load it beside them, unload idle models least recently used first, or refuse."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from app.page_models.fit_adapter import FitView, estimate
from app.page_models.memory_stack import legend, load_plan, memory_stacks
from app.page_models.router_models import ModelCard, library_model_id, library_path
from app.storage.app_settings import ServerKnobs
from backend.router.memory_check import CHILD_OVERHEAD_BYTES
from backend.settings.default_model import DEFAULT_MODEL_ID

MiB = 1 << 20
GiB = 1 << 30


def _view(ram_needed: int, ram_free: int, vram_needed: int = 0, vram_free: int = 0) -> FitView:
    return FitView("fits", "", ram_needed, ram_free, vram_needed, vram_free)


def test_resident_models_then_the_chosen_one_against_free_ram() -> None:
    cards = [
        ModelCard("org/coder-q4", "loaded", memory_bytes=600 * MiB, idle_s=30.0),
        ModelCard("embed", "loaded", memory_bytes=200 * MiB, idle_s=5.0),
        ModelCard("warming", "loading"),
        ModelCard("other", "unloaded"),
    ]
    ram, vram = memory_stacks(_view(300 * MiB, 3 * GiB), cards, "chat", reserve_bytes=GiB)
    assert vram is None  # no GPU
    assert [(s.model_id, s.role) for s in ram.segments] == [
        ("org/coder-q4", "resident"),
        ("embed", "resident"),
        ("warming", "resident"),
        ("chat", "new"),
    ]
    assert ram.segments[0].label == "coder-q4"
    assert ram.resident_bytes == 800 * MiB
    assert ram.new_bytes == 300 * MiB + CHILD_OVERHEAD_BYTES  # its server process too
    assert ram.room_bytes == 2 * GiB and ram.fits
    # the bar: the resident memory and the free memory, segments in order, no gaps
    spans = ram.spans()
    assert [seg.model_id for _, _, seg in spans] == ["org/coder-q4", "embed", "chat"]
    assert spans[0][0] == 0.0
    assert all(a[1] == pytest.approx(b[0]) for a, b in itertools.pairwise(spans))
    assert spans[1][1] == pytest.approx(800 / (800 + 3 * 1024))
    assert ram.reserve_span() == pytest.approx(((800 + 2048) / 3872, 1.0))
    assert ram.text() == "428.0 MiB of 3.0 GiB free"
    assert "warming: loading" in ram.tooltip() and "chat: 428.0 MiB (to load)" in ram.tooltip()
    plan = load_plan(ram, vram, cards, models_max=4)
    assert (plan.kind, plan.text) == ("fits", "Fits beside the 3 resident models.")


def test_a_chosen_model_already_resident_is_marked_not_added() -> None:
    cards = [
        ModelCard("chat", "loaded", memory_bytes=400 * MiB),
        ModelCard("embed", "loaded", memory_bytes=200 * MiB),
    ]
    ram, _ = memory_stacks(_view(300 * MiB, 3 * GiB), cards, "chat", reserve_bytes=GiB)
    assert [(s.model_id, s.role) for s in ram.segments] == [
        ("chat", "chosen"),
        ("embed", "resident"),
    ]
    assert ram.new_bytes == 0 and ram.text() == "3.0 GiB free"
    assert load_plan(ram, None, cards, 4).text == "chat is loaded beside 1 other model."
    # a file the server cannot load beside them adds nothing either
    ram, _ = memory_stacks(_view(300 * MiB, 3 * GiB), cards, None, reserve_bytes=GiB)
    assert ram.new_bytes == 0 and load_plan(ram, None, cards, 4).kind == ""


def test_with_a_gpu_each_model_is_split_between_vram_and_ram() -> None:
    cards = [
        ModelCard("big", "loaded", memory_bytes=5 * GiB, idle_s=10.0),
        ModelCard("small", "loaded", memory_bytes=GiB, idle_s=60.0),
    ]
    gpu = {"big": 4 * GiB, "small": 2 * GiB}  # more than the total: capped at it
    ram, vram = memory_stacks(
        _view(200 * MiB, 20 * GiB, 3 * GiB, 10 * GiB),
        cards,
        "chat",
        reserve_bytes=GiB,
        gpu_of=lambda card: gpu[card.id],
    )
    assert vram is not None
    assert [s.size_bytes for s in ram.segments] == [GiB, 0, 200 * MiB + CHILD_OVERHEAD_BYTES]
    assert [s.size_bytes for s in vram.segments] == [4 * GiB, GiB, 3 * GiB]
    assert [seg.model_id for _, _, seg in ram.spans()] == ["big", "chat"]  # nothing to draw
    # the legend names each model once, with its memory on both devices
    assert [(s.model_id, size) for s, size in legend(ram, vram)] == [
        ("big", 5 * GiB),
        ("small", GiB),
        ("chat", 3 * GiB + 200 * MiB + CHILD_OVERHEAD_BYTES),
    ]
    assert load_plan(ram, vram, cards, 4).kind == "fits"
    # VRAM too full for it: the router would unload an idle model to make room
    ram, vram = memory_stacks(
        _view(200 * MiB, 20 * GiB, 3 * GiB, 3 * GiB),
        cards,
        "chat",
        reserve_bytes=GiB,
        gpu_of=lambda card: gpu[card.id],
    )
    plan = load_plan(ram, vram, cards, 4)
    assert plan.kind == "evicts" and "unloads small first" in plan.text


def test_the_plan_unloads_idle_models_least_recently_used_first_or_refuses() -> None:
    cards = [
        ModelCard("recent", "loaded", memory_bytes=GiB, idle_s=10.0),
        ModelCard("oldest", "loaded", memory_bytes=GiB, idle_s=900.0),
        ModelCard("older", "loaded", memory_bytes=GiB, idle_s=300.0),
        ModelCard("serving", "loaded", memory_bytes=4 * GiB, in_flight=1, idle_s=2000.0),
        ModelCard("kept", "loaded", memory_bytes=4 * GiB, pinned=True, idle_s=5000.0),
    ]
    # 2.5 GiB needed, 1.5 GiB free less the 1 GiB reserve: two idle models must go
    view = _view(int(2.5 * GiB) - CHILD_OVERHEAD_BYTES, int(1.5 * GiB))
    ram, vram = memory_stacks(view, cards, "chat", reserve_bytes=GiB)
    plan = load_plan(ram, vram, cards, models_max=8)
    assert plan.kind == "evicts"
    assert plan.text.startswith("Loading it unloads oldest, older first")
    # more than every idle model gives back: refused, naming what holds memory
    view = _view(10 * GiB, int(1.5 * GiB))
    ram, vram = memory_stacks(view, cards, "chat", reserve_bytes=GiB)
    plan = load_plan(ram, vram, cards, models_max=8)
    assert plan.kind == "refused" and "(serving, kept: pinned or busy)" in plan.text
    # --models-max counts too: room enough, but one model must go first
    ram, vram = memory_stacks(_view(MiB, 100 * GiB), cards, "chat", reserve_bytes=GiB)
    plan = load_plan(ram, vram, cards, models_max=5)
    assert plan.kind == "evicts" and "unloads oldest first" in plan.text


def test_a_real_estimate_stacks_beside_the_resident_embedded_model() -> None:
    view = estimate(ServerKnobs(model="default", ctx_size=1024, parallel=2))
    assert view.exact and view.ram_needed > 0 and view.ram_total > 0
    card = ModelCard(DEFAULT_MODEL_ID, "loaded", memory_bytes=view.ram_needed)
    ram, _ = memory_stacks(view, [card], "beta", reserve_bytes=0)
    assert ram.new_bytes == view.ram_needed + CHILD_OVERHEAD_BYTES
    assert ram.span_bytes == view.ram_needed + max(view.ram_total, ram.new_bytes)
    assert load_plan(ram, None, [card], 4).text in (
        f"Fits beside {DEFAULT_MODEL_ID}.",
        "It does not fit even with every idle model unloaded: the server would refuse to load it.",
    )


def test_library_paths_and_ids_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "models"
    (root / "org").mkdir(parents=True)
    path = root / "org" / "coder.gguf"
    path.write_bytes(b"GGUF")
    assert library_path("org/coder", root) == str(path)
    assert library_model_id(str(path), root) == "org/coder"
    assert library_path(DEFAULT_MODEL_ID, root) == "default"
