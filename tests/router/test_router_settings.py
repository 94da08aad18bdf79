"""Router flags and the per-model settings store (no model loaded)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from backend.core.errors import ConfigError
from backend.entrypoints.main import build_parser
from backend.router.model_pool import ModelPool
from backend.settings import EngineSettings, RouterSettings
from backend.settings.flags import settings_from_args
from backend.settings.model_settings_store import ModelSettingsStore
from backend.settings.router_settings import parse_byte_size


def test_sizes_read_as_llama_cpp_users_write_them() -> None:
    assert parse_byte_size("8G") == 8 << 30
    assert parse_byte_size("512MiB") == 512 << 20
    assert parse_byte_size("2GB") == 2_000_000_000
    assert parse_byte_size("1.5k") == 1536
    assert parse_byte_size(4096) == 4096
    with pytest.raises(ValueError):
        parse_byte_size("lots")


def test_serve_router_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QUANTDESK_MODEL", raising=False)
    router_flags = ["--models-max", "2", "--no-models-autoload", "--idle-ttl", "30"]
    sizes = ["--memory-budget", "6G", "--memory-reserve", "512M"]
    argv = ["serve", "-m", "a.gguf", "-m", "b", *router_flags, *sizes, "-c", "1024"]
    args = build_parser().parse_args(argv)
    assert args.models == ["a.gguf", "b"]
    router = settings_from_args(RouterSettings, args)
    assert (router.models_max, router.models_autoload, router.idle_ttl) == (2, False, 30.0)
    assert (router.memory_budget, router.memory_reserve) == (6 << 30, 512 << 20)
    assert settings_from_args(EngineSettings, args).ctx_size == 1024
    with pytest.raises(ConfigError, match="--memory-budget"):
        settings_from_args(
            RouterSettings, build_parser().parse_args(["serve", "--memory-budget", "x"])
        )


def test_per_model_settings_override_the_defaults(tmp_path: Path) -> None:
    store = ModelSettingsStore(tmp_path / "models.json")
    defaults = EngineSettings(ctx_size=4096, parallel=4)
    assert store.apply("alpha", defaults) == defaults
    store.set("alpha", {"ctx_size": 1024, "cache_type_k": "q8_0"})
    store.set("alpha", {"parallel": 1})
    again = ModelSettingsStore(tmp_path / "models.json")  # another process reads the file
    applied = again.apply("alpha", defaults)
    assert (applied.ctx_size, applied.parallel, applied.cache_type_k) == (1024, 1, "q8_0")
    assert again.apply("beta", defaults) == defaults
    with pytest.raises(ConfigError, match="ctx_size"):
        store.set("alpha", {"ctx_size": 1})
    with pytest.raises(ConfigError, match="not a per-model setting: model"):
        store.set("alpha", {"model": "/elsewhere.gguf"})
    store.clear("alpha")
    assert again.apply("alpha", defaults) == defaults


def test_a_models_draft_model_and_session_cache_count_in_its_memory_need() -> None:
    from backend.fit.memory_probe import AvailableMemory
    from backend.router.memory_check import estimate_need
    from backend.settings.default_model import default_model_path

    memory = AvailableMemory(ram_free_bytes=64 << 30, ram_total_bytes=64 << 30)
    plain = EngineSettings(model=str(default_model_path()), ctx_size=2048, cache_ram=0)
    alone = estimate_need(plain, memory)
    both = estimate_need(plain.model_copy(update={"model_draft": "default"}), memory)
    assert both.cpu_bytes > alone.cpu_bytes and both.gpu_bytes == alone.gpu_bytes == 0
    # the RAM its sessions may be kept in (--cache-ram) is the model's to fill
    cached = estimate_need(plain.model_copy(update={"cache_ram": 1024}), memory)
    assert cached.cpu_bytes == alone.cpu_bytes + (1024 << 20)


def test_a_routers_mmproj_is_no_one_models_projector(
    make_pool: Callable[..., ModelPool], tmp_path: Path
) -> None:
    """``serve --mmproj X`` without ``-m`` would give every library model X: each child
    finds its own projector beside its model instead; --no-mmproj still reaches them."""
    pool = make_pool(fork_servers=False)
    pool.defaults = pool.defaults.model_copy(update={"mmproj": "/x/mmproj.gguf"})
    assert pool.settings_for("alpha", tmp_path / "alpha.gguf").mmproj is None
    pool.defaults = pool.defaults.model_copy(update={"mmproj": None, "no_mmproj": True})
    child = pool.settings_for("alpha", tmp_path / "alpha.gguf")
    assert child.no_mmproj and child.model == str(tmp_path / "alpha.gguf")
