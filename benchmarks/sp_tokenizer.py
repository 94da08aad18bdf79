"""A SentencePiece tokenizer trained here, offline, for the tiny models the tests and
benchmarks build (no tokenizer is downloaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def train_sentencepiece(folder: Path, vocab_size: int, text: str, **options: Any) -> None:
    """``folder/tokenizer.model``: a BPE model trained on ``text`` (unk 0, bos 1, eos 2,
    byte fallback); ``options`` go to the trainer (``user_defined_symbols``, ...)."""
    import sentencepiece as spm

    corpus = folder / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
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
        **options,
    )
    corpus.unlink()
    (folder / "tokenizer.vocab").unlink(missing_ok=True)
