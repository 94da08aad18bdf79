"""Session fixtures for the quantise tests: a tiny HF llama, its F16 GGUF, SmolLM2 as F16."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def business_prompts() -> list[str]:
    return (DATA / "business_prompts.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def tiny_hf_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight llama (hidden 256, 2 layers) with a SentencePiece tokenizer."""
    from tests.quantize.tiny_model import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("hf") / "tiny-llama")


@pytest.fixture(scope="session")
def tiny_f16(tiny_hf_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from quantize.convert import convert_hf_to_gguf

    return convert_hf_to_gguf(tiny_hf_model, tmp_path_factory.mktemp("tiny-f16"), "F16").path


@pytest.fixture(scope="session")
def smollm2_f16(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded SmolLM2-135M-Instruct Q4_1 requantised to F16.

    Upcasting Q4_1 to F16 keeps the Q4_1 rounding (lossy upstream), but gives a real-weight
    F16 source for the size and imatrix tests.
    """
    from quantize.quantizer import quantize_gguf

    out = tmp_path_factory.mktemp("smollm2-f16")
    return quantize_gguf(smollm2_path, "F16", out, allow_requantize=True).path
