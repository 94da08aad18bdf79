"""Build a tiny llama-architecture Hugging Face model folder, fully offline.

Random weights (hidden size 256 so K-quants apply), a SentencePiece tokenizer trained here
on local text and saved as ``tokenizer.model``, weights as safetensors.
"""

from __future__ import annotations

import json
from pathlib import Path

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


def _train_tokenizer(folder: Path, vocab_size: int) -> None:
    import sentencepiece as spm

    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 20) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / "tokenizer"),
        vocab_size=vocab_size,
        model_type="bpe",
        character_coverage=1.0,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        pad_id=-1,
        byte_fallback=True,
        minloglevel=2,
    )
    corpus.unlink()
    (folder / "tokenizer.vocab").unlink(missing_ok=True)


def build_tiny_llama(folder: Path, *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Write config.json, model.safetensors and tokenizer files into ``folder``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    _train_tokenizer(folder, vocab_size)
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
