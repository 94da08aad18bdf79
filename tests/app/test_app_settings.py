"""Settings round-trip through JSON, and a broken file never stops the app opening."""

from __future__ import annotations

from pathlib import Path

from app.app_settings import AppSettings


def test_round_trip(isolated_home: Path) -> None:
    s = AppSettings()
    s.server.ctx_size = 2048
    s.server.cache_type_k = "q8_0"
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
    assert loaded.chat.temperature == 0.2
    assert loaded.recent_models == ["/models/a.gguf", "/models/b.gguf"]


def test_broken_file_gives_defaults(isolated_home: Path) -> None:
    (isolated_home / "gui-settings.json").write_text("{not json", encoding="utf-8")
    assert AppSettings.load() == AppSettings.model_validate(AppSettings().model_dump())
    (isolated_home / "gui-settings.json").write_text('{"server": {"ctx_size": 1}}')
    assert AppSettings.load().server.ctx_size == 4096  # out of bounds -> defaults
