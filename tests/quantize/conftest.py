"""Session fixtures for the quantise tests: a tiny HF llama, its F16 GGUF, SmolLM2 as F16."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.model_cache import (
    CONVERTER_DISTS,
    HF_DISTS,
    LLAMA_DISTS,
    KeyPart,
    cached_build,
    sources,
    versions,
)

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def business_prompts() -> list[str]:
    return (DATA / "business_prompts.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def tiny_hf_model() -> Path:
    """A random-weight llama (hidden 256, 2 layers) with a SentencePiece tokenizer."""
    from tests.quantize.tiny_model import build_tiny_llama

    files = sources("tests.quantize.tiny_model", "benchmarks.sp_tokenizer")
    key: list[KeyPart] = [*files, versions(*HF_DISTS)]
    return cached_build("tiny-llama-hf", key, lambda out: build_tiny_llama(out / "tiny-llama"))


@pytest.fixture(scope="session")
def tiny_f16(tiny_hf_model: Path) -> Path:
    from quantize.convert import convert_hf_to_gguf

    key: list[KeyPart] = [tiny_hf_model, *sources("quantize.convert"), versions(*CONVERTER_DISTS)]
    return cached_build(
        "tiny-llama-f16", key, lambda out: convert_hf_to_gguf(tiny_hf_model, out, "F16").path
    )


@pytest.fixture(scope="session")
def smollm2_f16(smollm2_path: Path) -> Path:
    """The embedded SmolLM2-135M-Instruct Q4_1 requantised to F16.

    Upcasting Q4_1 to F16 keeps the Q4_1 rounding (lossy upstream), but gives a real-weight
    F16 source for the size and imatrix tests.
    """
    from quantize.quantizer import quantize_gguf

    # the sidecar beside it names the source's path
    key: list[KeyPart] = [smollm2_path, str(smollm2_path.resolve()), versions(*LLAMA_DISTS)]
    key += sources("quantize.quantizer", "quantize.quantize_worker", "quantize.output_files")
    return cached_build(
        "smollm2-f16",
        key,
        lambda out: quantize_gguf(smollm2_path, "F16", out, allow_requantize=True).path,
    )
