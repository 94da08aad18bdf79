"""A tiny vision-language model made here, offline: ``model.gguf`` and ``mmproj.gguf``.

No VLM ships on a package registry, so the tests and benchmarks of image input build one: a
Gemma 3 configuration (SigLIP vision tower, Gemma 3 text model) with random weights, a
SentencePiece tokenizer trained on local text (Gemma's image and turn markers included), a
Gemma-style chat template, converted by llama.cpp's converter (``convert_hf_to_gguf``, the
``quantize`` extra) into a text model and its projector. 64x64 pixel images become 16
image tokens. It writes nothing else and takes a few seconds. ``--vision gemma3`` gives the
projector Gemma 3's real vision tower (random weights, about 0.8 GB) with the same tiny text
model: what encoding an image costs a real Gemma 3, measured without a download.

    .venv/bin/python -m benchmarks.tiny_vlm OUT_DIR [--vision gemma3]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.sp_tokenizer import train_sentencepiece

log = logging.getLogger(__name__)

IMAGE_SIZE = 64
PATCH_SIZE = 8
TOKENS_PER_IMAGE = 16

# Vision towers: the tiny one of the tests, and Gemma 3's real SigLIP-so400m shape (896 px,
# 4,096 patches, 256 image tokens; about 400M parameters), random weights either way: the
# second times what encoding an image costs a real Gemma 3 projector.
VISION = {
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": IMAGE_SIZE,
        "patch_size": PATCH_SIZE,
        "tokens": TOKENS_PER_IMAGE,
    },
    "gemma3": {
        "hidden_size": 1152,
        "intermediate_size": 4304,
        "num_hidden_layers": 27,
        "num_attention_heads": 16,
        "image_size": 896,
        "patch_size": 14,
        "tokens": 256,
    },
}
SPECIAL = ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>"]
IMAGE_SOFT_TOKEN = "<image_soft_token>"
MIXING = 12.0  # attention values and outputs scaled up: other positions (the image) count

CORPUS_LINES = [
    "The invoice was sent to the customer on Monday morning.",
    "Please confirm the delivery address before we ship the order.",
    "A red square sits in the corner of a blue picture.",
    "The screenshot shows an error dialog with a stack trace.",
    "Describe the image: a cat, a tree, a chart with three bars.",
    "A quantised model uses fewer bytes per weight than the original.",
    "The meeting about the new pricing plan starts at ten o'clock.",
    "What colour is the circle? It is green, on a white page.",
    "We store backups in two data centres for safety.",
    "The warehouse counts its stock at the end of each month.",
]

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] | trim }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}{{ '<start_of_image>' }}"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}"
    "{% endfor %}{% endif %}{{ '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)


def build_hf_folder(
    folder: Path, *, vocab_size: int = 512, seed: int = 0, vision: str = "tiny"
) -> Path:
    """The Hugging Face folder: config, safetensors weights, tokenizer files."""
    import sentencepiece as spm
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    text = "\n".join(CORPUS_LINES * 20) + "\n"
    train_sentencepiece(folder, vocab_size, text, user_defined_symbols=[*SPECIAL, IMAGE_SOFT_TOKEN])
    sp = spm.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
    ids = {s: sp.piece_to_id(s) for s in [*SPECIAL, IMAGE_SOFT_TOKEN]}
    torch.manual_seed(seed)
    tower = VISION[vision]
    config = Gemma3Config(
        text_config={
            "vocab_size": vocab_size,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
            "sliding_window": 128,
            "max_position_embeddings": 4096,
            "bos_token_id": 1,
            "eos_token_id": [2, ids["<end_of_turn>"]],
            "pad_token_id": 0,
        },
        vision_config={
            "model_type": "siglip_vision_model",
            "vision_use_head": False,
            **{k: v for k, v in tower.items() if k != "tokens"},
        },
        mm_tokens_per_image=tower["tokens"],
        boi_token_index=ids["<start_of_image>"],
        eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids[IMAGE_SOFT_TOKEN],
    )
    model = Gemma3ForConditionalGeneration(config)
    with torch.no_grad():  # random weights: make the picture weigh in the answer
        # transformers leaves the projection at zero (every image would read as nothing)
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(0.0, 0.2)
        for name, p in model.model.language_model.named_parameters():
            if name.endswith(("v_proj.weight", "o_proj.weight")):
                p.mul_(MIXING)
    model.save_pretrained(folder, safe_serialization=True)
    _vision_names_as_converter_reads_them(folder / "model.safetensors")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GemmaTokenizer",
                "bos_token": "<s>",
                "eos_token": "<end_of_turn>",
                "unk_token": "<unk>",
                "add_bos_token": True,
                "add_eos_token": False,
                "chat_template": CHAT_TEMPLATE,
            }
        ),
        encoding="utf-8",
    )
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "Gemma3ImageProcessor",
                "image_mean": [0.5, 0.5, 0.5],
                "image_std": [0.5, 0.5, 0.5],
                "size": {"height": tower["image_size"], "width": tower["image_size"]},
                "image_seq_length": tower["tokens"],
                "do_pan_and_scan": False,
            }
        ),
        encoding="utf-8",
    )
    return folder


def _vision_names_as_converter_reads_them(weights: Path) -> None:
    """transformers 5 saves the SigLIP tower's tensors as ``vision_tower.encoder...``;
    llama.cpp's converter maps ``vision_tower.vision_model.encoder...`` (the layout of
    Gemma 3 checkpoints on the Hub): rename them so."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(weights))
    renamed = {
        (
            "vision_tower.vision_model." + name.removeprefix("vision_tower.")
            if name.startswith("vision_tower.") and ".vision_model." not in name
            else name
        ): tensor
        for name, tensor in tensors.items()
    }
    save_file(renamed, str(weights), metadata={"format": "pt"})


def convert(hf: Path, out: Path, *, mmproj: bool, script: Path | None = None) -> None:
    """llama.cpp's converter: the ``quantize`` extra's module, or ``script`` (a checkout's
    ``convert_hf_to_gguf.py``, as the GPU kit carries)."""
    head = [sys.executable, str(script)] if script else [sys.executable, "-m", "convert_hf_to_gguf"]
    argv = [*head, str(hf), "--outfile", str(out)]
    argv += ["--outtype", "f16"] + (["--mmproj"] if mmproj else [])
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"convert_hf_to_gguf failed: {done.stderr.strip()[-2000:]}")


def build_tiny_vlm(
    out_dir: Path, *, seed: int = 0, vision: str = "tiny", converter: Path | None = None
) -> tuple[Path, Path]:
    """Write ``out_dir/model.gguf`` and ``out_dir/mmproj.gguf`` (``vision``: a key of
    :data:`VISION`; ``converter``: see :func:`convert`); returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model, mmproj = out_dir / "model.gguf", out_dir / "mmproj.gguf"
    with tempfile.TemporaryDirectory(prefix="tiny-vlm-", dir=out_dir) as tmp:
        hf = build_hf_folder(Path(tmp) / "hf", seed=seed, vision=vision)
        convert(hf, model, mmproj=False, script=converter)
        convert(hf, mmproj, mmproj=True, script=converter)
    log.info("tiny VLM written: %s, %s", model, mmproj)
    return model, mmproj


def builder_main(doc: str | None, build: Callable[..., tuple[Path, Path]]) -> None:
    """The command line of a tiny model's builder: ``OUT_DIR [--seed N]``."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build(args.out_dir, seed=args.seed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vision", choices=sorted(VISION), default="tiny")
    p.add_argument("--converter", type=Path, help="a convert_hf_to_gguf.py to run")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build_tiny_vlm(args.out_dir, seed=args.seed, vision=args.vision, converter=args.converter)


if __name__ == "__main__":
    main()
