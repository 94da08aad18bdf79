"""A tiny BERT embedding model, built offline: random weights, a hand-written WordPiece
vocab.txt, converted to GGUF by our own convert step (llama.cpp's convert_hf_to_gguf).

The converter names a tokenizer's pre-tokenizer by hashing the ids it gives a fixed check
text (``get_vocab_base_pre``), and refuses a hash it does not know. The vocab below puts
the pieces BAAI/bge-small-en-v1.5 (bert-base-uncased's WordPiece vocab) splits that text
into at bge's own ids, so the hash is bge's and the GGUF says ``bert-bge``, which is what a
BERT WordPiece tokenizer is. The other ids hold a few common words, every letter alone
and as a ``##`` continuation (any lowercase ASCII word has a tokenisation), and
``[unusedN]`` fillers. Every one of those pieces is in bge's vocab too, so the check
text splits as bge splits it.

Beside it, a tiny reranker (:func:`build_tiny_reranker`): an
``XLMRobertaForSequenceClassification`` with one label, bge-reranker's architecture, with a
SentencePiece unigram tokenizer trained here on a few sentences. llama.cpp's converter
writes its classification head as ``cls`` (dense, tanh) and ``cls.output``, which is what
rank pooling runs, and names no pre-tokenizer for XLM-R (no hash to match). It is not
a ``BertForSequenceClassification``: the converter drops BERT's pooler (``pooler.dense``,
the dense+tanh layer BERT's classifier reads), so llama.cpp's score for such a model is
the classifier on the raw first token, not the logit transformers gives
(``build_tiny_bert(classifier=True)`` builds one, to show it).
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import pytest

from tests.model_cache import CONVERTER_DISTS, HF_DISTS, KeyPart, cached_build, sources, versions

HIDDEN = 32  # the embedding dimension
LAYERS = 2
HEADS = 2

# id -> piece: how bge-small-en-v1.5 splits the converter's check text ([CLS] ... [SEP])
_CHECK_PIECES = {
    100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 999: "!", 1000: '"', 1005: "'",
    1006: "(", 1007: ")", 1010: ",", 1011: "-", 1012: ".", 1017: "3",
    1027: "=", 1029: "?", 1036: "`", 1037: "a", 1040: "d", 1045: "i",
    1049: "m", 1055: "s", 1181: "б", 1192: "н", 1811: "天", 1855: "我",
    1995: "～", 2002: "he", 2009: "it", 2017: "you", 2025: "not", 2042: "been",
    2045: "there", 2057: "we", 2066: "like", 2070: "some", 2128: "re", 2191: "make",
    2222: "ll", 2310: "ve", 2409: "told", 2469: "sure", 2483: "##is", 2509: "##3",
    3671: "normal", 3674: "multiple", 3943: "33", 5572: "tea", 6207: "apple", 7861: "em",
    9530: "con", 10260: "##а", 10325: "##и", 14150: "##о", 14677: "131", 15290: "##е",
    16280: "##cate", 16856: "##р", 21211: "333", 22203: "##51", 22394: "##33", 23632: "##41",
    23854: "##nated", 23925: "##к", 29147: "##oj", 29436: "##л", 29741: "##г", 29747: "##с",
    29754: "##щ", 29755: "##ъ",
}  # fmt: skip
_SPECIAL = {0: "[PAD]", 103: "[MASK]"}
_WORDS = [
    *("the", "cat", "sat", "on", "mat", "dog", "ran", "in", "park", "hello", "world"),
    *("lighthouse", "story", "sea", "ship", "customer", "order", "price", "bank", "river"),
    *("money", "water", "music", "song"),
]


def vocab_lines() -> list[str]:
    """The vocab.txt lines: the check pieces at their ids, then words, letters, fillers."""
    size = max(_CHECK_PIECES) + 1
    fixed = {**_CHECK_PIECES, **_SPECIAL}
    taken = set(fixed.values())
    extra = [w for w in _WORDS if w not in taken]
    extra += [c for c in string.ascii_lowercase if c not in taken]
    extra += [f"##{c}" for c in string.ascii_lowercase if f"##{c}" not in taken]
    free = (i for i in range(size) if i not in fixed)
    lines = dict(fixed)
    for piece, i in zip(extra, free, strict=False):
        lines[i] = piece
    return [lines.get(i, f"[unused{i}]") for i in range(size)]


def build_tiny_bert(folder: Path, *, seed: int = 0, classifier: bool = False) -> Path:
    """A sentence-transformers style BERT folder (mean pooling) with random weights; with
    ``classifier``, a ``BertForSequenceClassification`` with one label (a cross-encoder,
    as ms-marco-MiniLM's) instead."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    folder.mkdir(parents=True, exist_ok=True)
    lines = vocab_lines()
    (folder / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}),
        encoding="utf-8",
    )
    # our convert step asks for tokenizer.json: the fast tokenizer writes it from vocab.txt
    AutoTokenizer.from_pretrained(folder).save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(lines),
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=128,
        type_vocab_size=2,
        pad_token_id=0,
        # a classifier's: one label, and the tiny reranker's spread of weights
        **({"num_labels": 1, "initializer_range": 0.5} if classifier else {}),
    )
    if classifier:
        BertForSequenceClassification(config).save_pretrained(folder, safe_serialization=True)
        return folder
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    kinds = ("Transformer", "Pooling")
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (kind, path) in enumerate(zip(kinds, ("", "1_Pooling"), strict=True))
    ]
    (folder / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": HIDDEN, "pooling_mode_mean_tokens": True}),
        encoding="utf-8",
    )
    return folder


def reference_embedding(folder: Path, text: str) -> tuple[list[int], np.ndarray]:
    """The token ids and the mean-pooled, L2-normalised vector transformers gives ``text``
    (what sentence-transformers computes for this model)."""
    import torch
    from transformers import AutoTokenizer, BertModel

    ids: list[int] = AutoTokenizer.from_pretrained(folder)(text)["input_ids"]
    model = BertModel.from_pretrained(folder).eval()
    with torch.no_grad():
        hidden = model(torch.tensor([ids])).last_hidden_state[0]
    vector = hidden.mean(dim=0).numpy().astype(np.float64)
    return ids, vector / np.linalg.norm(vector)


@pytest.fixture(scope="session")
def tiny_bert_folder() -> Path:
    """The tiny BERT as a Hugging Face folder (built once, kept by tests/model_cache.py)."""
    key: list[KeyPart] = [Path(__file__), versions(*HF_DISTS)]
    return cached_build("tiny-bert-hf", key, lambda out: build_tiny_bert(out / "tiny-bert"))


@pytest.fixture(scope="session")
def tiny_bert_gguf(tiny_bert_folder: Path) -> Path:
    """The tiny BERT as an F32 GGUF named ``tiny-bert.gguf`` (converted once)."""
    return converted_f32("tiny-bert", tiny_bert_folder)


def converted_f32(name: str, folder: Path) -> Path:
    """``folder`` converted to F32 by our convert step, as ``<name>.gguf`` (kept by
    tests/model_cache.py)."""
    from quantize.convert import convert_hf_to_gguf

    def build(out: Path) -> Path:
        converted = convert_hf_to_gguf(folder, out, "F32").path
        return converted.rename(converted.with_name(f"{name}.gguf"))

    key: list[KeyPart] = [folder, *sources("quantize.convert"), versions(*CONVERTER_DISTS)]
    return cached_build(f"{name}-gguf", key, build)


# ---- the tiny reranker ------------------------------------------------------------------
RERANKER_LAYERS = 2
_SENTENCES = [
    "the river runs to the sea past the old lighthouse",
    "where does the river meet the sea",
    "the ship sailed from the river mouth into the open sea",
    "the bank by the river keeps our money safe",
    "the customer paid the price of the order at the bank",
    "a cat sat on the mat in the sun",
    "the dog ran in the park after the ball",
    "music and a song in the park on a summer evening",
    "hello world from a tiny model",
    "the lighthouse keeper told a story about the sea",
    "water flows down the river to the sea",
    "an order of tea and an apple for the customer",
    "we like to make music and sing a song",
    "the price of water is not the price of money",
    "a story of a ship lost at sea near the lighthouse",
]


def _train_sentencepiece(folder: Path, vocab_size: int) -> Path:
    """A unigram SentencePiece model (XLM-R's kind) trained on the sentences above."""
    import sentencepiece as spm

    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(_SENTENCES * 4) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(folder / "sentencepiece.bpe"),
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        num_threads=1,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    corpus.unlink()
    (folder / "sentencepiece.bpe.vocab").unlink()
    return folder / "sentencepiece.bpe.model"


def build_tiny_reranker(folder: Path, *, seed: int = 0) -> Path:
    """An ``XLMRobertaForSequenceClassification`` folder (one label: a relevance score)
    with random weights and a SentencePiece tokenizer, as bge-reranker's folder holds."""
    import sentencepiece as spm
    import torch
    from sentencepiece import sentencepiece_model_pb2
    from transformers import (
        XLMRobertaConfig,
        XLMRobertaForSequenceClassification,
        XLMRobertaTokenizer,
    )

    folder.mkdir(parents=True, exist_ok=True)
    sp_file = _train_sentencepiece(folder, vocab_size=160)
    sp = spm.SentencePieceProcessor(model_file=str(sp_file))
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(sp_file.read_bytes())
    # XLM-R's ids: <s> <pad> </s> <unk>, then SentencePiece's pieces shifted by one
    # (fairseq's order), then <mask>: the order llama.cpp's converter rebuilds
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(sp.id_to_piece(i), sp.get_score(i)) for i in range(3, sp.get_piece_size())]
    vocab += [("<mask>", 0.0)]
    tokenizer = XLMRobertaTokenizer(
        vocab=vocab, _spm_precompiled_charsmap=proto.normalizer_spec.precompiled_charsmap
    )
    tokenizer.save_pretrained(folder)  # tokenizer.json: our convert step asks for one
    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        num_hidden_layers=RERANKER_LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=128 + 2,  # positions start after the padding id, as XLM-R's
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        num_labels=1,
        # BERT's 0.02 leaves every document's first token alike: scores within 0.01
        initializer_range=0.5,
    )
    XLMRobertaForSequenceClassification(config).save_pretrained(folder, safe_serialization=True)
    return folder


def reference_rerank(
    folder: Path, query: str, documents: list[str]
) -> list[tuple[list[int], float]]:
    """For each document: the token ids transformers gives the (query, document) pair and
    the model's logit for it (what sentence-transformers' CrossEncoder computes)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    out: list[tuple[list[int], float]] = []
    for document in documents:
        ids: list[int] = tokenizer(query, document)["input_ids"]
        with torch.no_grad():
            logit = float(model(torch.tensor([ids])).logits[0, 0])
        out.append((ids, logit))
    return out


@pytest.fixture(scope="session")
def tiny_reranker_folder() -> Path:
    """The tiny reranker as a Hugging Face folder (built once, kept by tests/model_cache.py)."""
    key: list[KeyPart] = [Path(__file__), versions(*HF_DISTS)]
    return cached_build(
        "tiny-reranker-hf", key, lambda out: build_tiny_reranker(out / "tiny-reranker")
    )


@pytest.fixture(scope="session")
def tiny_reranker_gguf(tiny_reranker_folder: Path) -> Path:
    """The tiny reranker as an F32 GGUF named ``tiny-reranker.gguf``, as our convert step
    (llama.cpp's converter) writes it: a classification head, no pooling type declared."""
    return converted_f32("tiny-reranker", tiny_reranker_folder)
