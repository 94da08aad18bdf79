"""A tiny audio-language model made here, offline: ``model.gguf`` and ``mmproj.gguf``.

No audio model ships on a package registry either, so the tests of audio input build one:
the text model of :mod:`benchmarks.tiny_vlm` (a tiny Gemma 3 with a locally trained
SentencePiece tokenizer) and, as its projector, a Qwen2-Audio configuration's Whisper
encoder (random weights, 3 layers of width 64, its projection to the text model's width)
converted by llama.cpp's converter (``convert_hf_to_gguf --mmproj``). libmtmd reads WAV
and MP3 for it, resamples to 16 kHz and turns each 30 s of audio into 750 tokens. It
takes a few seconds.

    .venv/bin/python -m benchmarks.tiny_audio_lm OUT_DIR
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from benchmarks.tiny_vlm import build_hf_folder, builder_main, convert

log = logging.getLogger(__name__)

TEXT_WIDTH = 64  # the tiny text model's hidden size: the projector's output
PROJECTION_STD = 0.5  # random weights: make the clip weigh in the answer


def build_audio_folder(folder: Path, *, seed: int = 0) -> Path:
    """The Hugging Face folder of a tiny Qwen2-Audio (only its encoder is converted)."""
    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = Qwen2AudioConfig(
        audio_config={
            "model_type": "qwen2_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 3,  # the converter maps conv2 as block 2: at least 3
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 128,
            "d_model": 64,
            "max_source_positions": 1500,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": 512,
            "hidden_size": TEXT_WIDTH,
            "intermediate_size": 128,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
        },
    )
    model = Qwen2AudioForConditionalGeneration(config)
    with torch.no_grad():
        model.model.multi_modal_projector.linear.weight.normal_(0.0, PROJECTION_STD)
    model.save_pretrained(folder, safe_serialization=True)
    _names_as_converter_reads_them(folder / "model.safetensors")
    (folder / "preprocessor_config.json").write_text(
        json.dumps({"feature_size": 128, "sampling_rate": 16000}), encoding="utf-8"
    )
    return folder


def _names_as_converter_reads_them(weights: Path) -> None:
    """llama.cpp's converter maps the names of Qwen2-Audio checkpoints on the Hub
    (``audio_tower...``, ``multi_modal_projector...``); transformers may save them under
    ``model.``. Only the encoder and projector are kept (the converter skips the rest)."""
    from safetensors.torch import load_file, save_file

    tensors = {n.removeprefix("model."): t for n, t in load_file(str(weights)).items()}
    kept = {
        name: tensor
        for name, tensor in tensors.items()
        if name.startswith(("audio_tower.", "multi_modal_projector."))
    }
    save_file(kept, str(weights), metadata={"format": "pt"})


def build_tiny_audio_lm(out_dir: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Write ``out_dir/model.gguf`` and ``out_dir/mmproj.gguf``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model, mmproj = out_dir / "model.gguf", out_dir / "mmproj.gguf"
    with tempfile.TemporaryDirectory(prefix="tiny-alm-", dir=out_dir) as tmp:
        text = build_hf_folder(Path(tmp) / "text", seed=seed)
        convert(text, model, mmproj=False)
        audio = build_audio_folder(Path(tmp) / "audio", seed=seed)
        convert(audio, mmproj, mmproj=True)
    log.info("tiny audio LM written: %s, %s", model, mmproj)
    return model, mmproj


def main() -> None:
    builder_main(__doc__, build_tiny_audio_lm)


if __name__ == "__main__":
    main()
