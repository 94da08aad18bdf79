"""Settings round-trip through JSON, and a broken file never stops the app opening."""

from __future__ import annotations

from pathlib import Path

from app.storage.app_settings import AppSettings, ServerKnobs


def test_round_trip(isolated_home: Path) -> None:
    s = AppSettings()
    s.server.ctx_size = 2048
    s.server.cache_type_k = "q8_0"
    s.server = s.server.model_copy(
        update={"spec_type": "draft-simple", "model_draft": "/models/d.gguf", "draft_max": 8}
    )
    s.chat.temperature = 0.2
    s.remember_model("/models/a.gguf")
    s.remember_model("/models/b.gguf")
    s.remember_model("/models/a.gguf")
    path = s.save()
    assert path.parent == isolated_home
    assert not list(isolated_home.glob("*.part"))
    loaded = AppSettings.load()
    assert loaded.server.ctx_size == 2048
    assert loaded.server.cache_type_k == "q8_0"
    assert (loaded.server.spec_types, loaded.server.model_draft, loaded.server.draft_max) == (
        ("draft-simple",),
        "/models/d.gguf",
        8,
    )
    assert loaded.chat.temperature == 0.2
    assert loaded.recent_models == ["/models/a.gguf", "/models/b.gguf"]


def test_broken_file_gives_defaults(isolated_home: Path) -> None:
    (isolated_home / "gui-settings.json").write_text("{not json", encoding="utf-8")
    assert AppSettings.load() == AppSettings.model_validate(AppSettings().model_dump())
    (isolated_home / "gui-settings.json").write_text('{"server": {"ctx_size": 1}}')
    assert AppSettings.load().server.ctx_size == 16384  # out of bounds -> defaults


# gui-settings.json as versions before serve's settings model wrote it: api_key "" for no key,
# no prefix_cache_entries, no speculative decoding knobs
SAVED_BY_EARLIER_VERSIONS = """{"server": {"model": "/models/a.gguf", "ctx_size": 2048,
"batch_size": 256, "ubatch_size": 128, "parallel": 2, "gpu_layers": 12, "cache_type_k": "q8_0",
"cache_type_v": "q8_0", "flash_attn": "on", "kv_per_slot": true, "threads": 3,
"host": "0.0.0.0", "port": 8081, "api_key": "", "cors_origins": ["http://a"]},
"chat": {"temperature": 0.2}, "recent_models": ["/models/a.gguf"], "autostart_server": false}"""


def test_settings_saved_by_earlier_versions_load(isolated_home: Path) -> None:
    (isolated_home / "gui-settings.json").write_text(SAVED_BY_EARLIER_VERSIONS, encoding="utf-8")
    loaded = AppSettings.load()
    assert loaded.server == ServerKnobs(
        model="/models/a.gguf",
        ctx_size=2048,
        batch_size=256,
        ubatch_size=128,
        parallel=2,
        gpu_layers=12,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        flash_attn="on",
        kv_unified=False,
        threads=3,
        host="0.0.0.0",
        port=8081,
        api_key="",
        cors_origins=["http://a"],
    )
    assert loaded.server.prefix_cache_entries == 8  # a knob the file predates: serve's default
    # so is speculative decoding: serve's default n-gram drafting and draft defaults
    assert loaded.server.spec_types == ("ngram-simple",)
    assert loaded.server.model_draft is None and loaded.server.draft_max == 16
    assert loaded.chat.temperature == 0.2 and loaded.autostart_server is False


def test_an_unknown_speculative_type_gives_defaults(isolated_home: Path) -> None:
    """A hand-edited file with a type serve refuses would stop serve at every start."""
    (isolated_home / "gui-settings.json").write_text('{"server": {"spec_type": "eagle3"}}')
    assert AppSettings.load().server.spec_type == "ngram-simple"
