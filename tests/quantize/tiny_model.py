"""Build a tiny llama-architecture Hugging Face model folder, fully offline.

Random weights (hidden size 256 so K-quants apply), a SentencePiece tokenizer trained here
on local text and saved as ``tokenizer.model``, weights as safetensors.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.sp_tokenizer import train_sentencepiece

CORPUS_LINES = [
    "The invoice was sent to the customer on Monday morning.",
    "Please confirm the delivery address before we ship the order.",
    "Our support team answers tickets within one business day.",
    "The quarterly report shows revenue growth in every region.",
    "Refunds are processed to the original payment method.",
    "A quantised model uses fewer bytes per weight than the original.",
    "The meeting about the new pricing plan starts at ten o'clock.",
    "Customers can reset their password from the account page.",
    "We store backups in two data centres for safety.",
    "The warehouse counts its stock at the end of each month.",
]


def build_tiny_llama(folder: Path, *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Write config.json, model.safetensors and tokenizer files into ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    train_sentencepiece(folder, vocab_size, "\n".join(CORPUS_LINES * 20) + "\n")
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "LlamaTokenizer",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "add_bos_token": True,
                "add_eos_token": False,
            }
        ),
        encoding="utf-8",
    )
    return folder
