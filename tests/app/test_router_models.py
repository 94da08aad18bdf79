"""The GUI's view of a library server without Qt or a server: which id a chosen model has,
the command line without -m, the resident models' rows, the dashboard's "All models"
snapshot, and load failures in plain words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.page_models.router_models import (
    ModelCard,
    combine_snapshots,
    library_change_note,
    library_model_id,
    model_overrides,
    parse_models,
    resident_cells,
    resident_rows,
    with_model_overrides,
)
from app.page_models.server_command import serve_arguments
from app.page_models.server_errors import explain_load_failure
from app.storage.app_settings import ServerKnobs
from backend.settings.default_model import DEFAULT_MODEL_ID
from tests.server.stats_sample import sample_stats


def test_library_ids_of_chosen_models(tmp_path: Path) -> None:
    root = tmp_path / "models"
    (root / "org" / "repo").mkdir(parents=True)
    nested = root / "org" / "repo" / "coder-q4_k_m.gguf"
    nested.write_bytes(b"GGUF")
    outside = tmp_path / "elsewhere.gguf"
    outside.write_bytes(b"GGUF")
    assert library_model_id("default", root) == DEFAULT_MODEL_ID
    assert library_model_id(str(nested), root) == "org/repo/coder-q4_k_m"
    assert library_model_id(str(outside), root) is None  # served alone, as before
    assert library_model_id(str(root / "missing.gguf"), root) is None


def test_a_library_server_is_started_without_a_model(tmp_path: Path) -> None:
    knobs = ServerKnobs(model="/some/where/m.gguf", model_draft="/d/draft.gguf", ctx_size=2048)
    alone = serve_arguments(knobs, tmp_path / "port")
    library = serve_arguments(knobs, tmp_path / "port", library=True)
    assert "--model" in alone and "/some/where/m.gguf" in alone
    assert "--model" not in library and "/some/where/m.gguf" not in library
    # every other knob stays: they are each model's defaults
    assert [a for a in alone if a not in ("--model", "/some/where/m.gguf")] == library
    assert "/d/draft.gguf" in library and "2048" in library


def test_per_model_knobs_round_trip() -> None:
    knobs = ServerKnobs(ctx_size=4096, parallel=2, cache_type_k="q8_0", port=9000)
    stored = model_overrides(knobs)
    assert stored["ctx_size"] == 4096 and stored["cache_type_k"] == "q8_0"
    assert "port" not in stored and "model" not in stored  # where to listen is not per model
    shown = with_model_overrides(ServerKnobs(port=9000), stored)
    assert shown.ctx_size == 4096 and shown.parallel == 2 and shown.port == 9000
    # a remembered value that no longer validates leaves the knobs as they were
    assert with_model_overrides(knobs, {"ctx_size": 1}).ctx_size == 4096


def test_model_cards_and_resident_rows() -> None:
    body = {
        "object": "list",
        "data": [
            {"id": "a", "status": {"value": "loaded"}, "pinned": True, "in_flight": 2,
             "memory_bytes": 3 * 2**30, "idle_s": 75.0},
            {"id": "b", "status": {"value": "unloaded"}, "memory_bytes": None},
            {"id": "c", "status": {"value": "failed", "failed": True, "error": "exit 134"}},
            {"id": "d", "status": {"value": "unloaded"}},
        ],
    }  # fmt: skip
    cards = parse_models(body)
    assert [c.id for c in resident_rows(cards, acted_on={"d"})] == ["a", "c", "d"]
    assert resident_cells(cards[0]) == ["a", "loaded, pinned", "3.0 GiB", "1 min", "2"]
    nested = ModelCard("org/repo/coder-q4_k_m", "loaded")
    assert resident_cells(nested)[:2] == ["coder-q4_k_m", "loaded"]
    assert resident_cells(cards[1])[2:4] == ["–", "–"]
    assert cards[2].error == "exit 134"
    # a single server's card has no status: its one model is loaded
    assert parse_models({"data": [{"id": "solo"}]}) == [ModelCard("solo", "loaded")]
    assert parse_models({"detail": "nope"}) == []
    # what each model can do, as the server derives it (the pickers show all but completion)
    seeing = parse_models({"data": [{"id": "v", "capabilities": ["completion", "vision"]}]})
    assert seeing[0].capabilities == ("completion", "vision") and seeing[0].tags() == "vision"
    assert cards[0].tags() == ""


def test_all_models_adds_up_and_keeps_the_worst_latency() -> None:
    one, two = sample_stats(1), sample_stats(4)
    both = combine_snapshots([one, two])
    assert both is not None
    assert both.requests.completed == one.requests.completed + two.requests.completed
    assert both.tokens.generated_total == one.tokens.generated_total + two.tokens.generated_total
    assert both.kv.cells_total == one.kv.cells_total + two.kv.cells_total
    assert both.kv.used_pct == 100.0 * both.kv.cells_used / both.kv.cells_total
    assert both.system.rss_bytes == one.system.rss_bytes + two.system.rss_bytes
    p99s = [s.latency.ttft_ms_p99 for s in (one, two) if s.latency.ttft_ms_p99 is not None]
    assert both.latency.ttft_ms_p99 == (max(p99s) if p99s else None)
    assert both.model.id == "2 models"
    # each model's sessions kept in RAM and on disk add up, tier by tier
    kept = [
        s.model_copy(
            update={
                "session_cache": s.session_cache.model_copy(
                    update={
                        "ram": s.session_cache.ram.model_copy(update={"entries": k}),
                        "disk": s.session_cache.disk.model_copy(update={"tokens_saved": 100 * k}),
                    }
                )
            }
        )
        for k, s in ((2, one), (5, two))
    ]
    both = combine_snapshots(kept)
    assert both is not None and both.session_cache.ram.entries == 7
    assert both.session_cache.disk.tokens_saved == 700
    from app.pages.dashboard_page import session_tiers_text

    said = session_tiers_text(both)
    assert "RAM: 7 sessions" in said and "700 tokens restored" in said
    assert combine_snapshots([one]) is one
    assert combine_snapshots([]) is None


def test_load_failures_in_plain_words() -> None:
    full = explain_load_failure(
        "big", "needs 9.1 GiB, 4.0 GiB free (budget 6 GiB)", "insufficient_memory"
    )
    assert full.kind == "oom" and "does not fit" in str(full) and "9.1 GiB" in str(full)
    oom = explain_load_failure(
        "big",
        "the model 'big' could not be loaded: model big failed to load (its server exited "
        "with code 1): quantdesk: error: failed to allocate the KV cache",
        "model_load_failed",
    )
    assert oom.kind == "oom" and "ran out of memory" in str(oom) and oom.while_starting
    other = explain_load_failure("m", "the model 'm' does not exist", "model_not_found")
    assert other.kind == "load_failed" and "m could not be loaded" in str(other)


def test_what_a_library_server_needs_to_apply_changed_knobs() -> None:
    running = ServerKnobs(model="default", ctx_size=1024, parallel=2, port=9000)
    restart = "Settings changed: press Restart to apply them."

    def note(
        shown: ServerKnobs, chosen: str | None, resident: set[str], kept: dict[str, Any]
    ) -> object:
        return library_change_note(running, shown, chosen, resident, kept, restart)

    assert note(running, DEFAULT_MODEL_ID, {DEFAULT_MODEL_ID}, {}) is None
    # where it listens is the whole server's: only a restart applies it
    assert note(running.model_copy(update={"port": 9001}), DEFAULT_MODEL_ID, set(), {}) == restart
    # another library model loads beside the others, no restart
    coder = running.model_copy(update={"model": "/lib/org/coder.gguf"})
    assert str(note(coder, "org/coder", {DEFAULT_MODEL_ID}, {})).startswith(
        "coder is not loaded: Load (Resident models) puts it beside the others"
    )
    # a resident model's own knobs apply when it loads again
    bigger = coder.model_copy(update={"ctx_size": 2048})
    assert note(bigger, "org/coder", {"org/coder"}, {"ctx_size": 1024}) == (
        "Settings changed: press Restart to apply them, or Unload and Load coder."
    )
    assert note(bigger, "org/coder", {"org/coder"}, {"ctx_size": 2048}) is None
    assert "outside the library" in str(note(coder, None, {DEFAULT_MODEL_ID}, {}))


def test_the_model_pickers_facts_say_what_the_model_can_do(
    tiny_vlm: tuple[Path, Path], smollm2_path: Path
) -> None:
    """The Server page's line under the picker: from the GGUF header and the projector
    beside it, by the function every dialect uses."""
    from app.page_models.model_choices import describe, model_facts

    model, _mmproj = tiny_vlm
    facts = model_facts(str(model))
    assert facts is not None and facts.capabilities == ("completion", "vision")
    assert describe(facts).endswith(" · vision")
    plain = model_facts(str(smollm2_path))
    assert plain is not None and plain.capabilities == ("completion",)
