"""Which GGUF files are rerankers, read from the files themselves and from llama.cpp:

- the converted tiny reranker carries a one-output classification head and declares no
  pooling type (llama.cpp's converter writes none for *ForSequenceClassification), and
  llama.cpp runs its rank-pooling context with it;
- the same file declaring ``bert.pooling_type = 4`` (rank) scores the same;
- the tiny BERT embedding model, the chat model, and the chat model declared as rank
  pooling without a head are not rerankers, each for its own stated reason;
- a converted BertForSequenceClassification is served, but llama.cpp's converter drops
  BERT's pooler, so its score is the classifier on the raw first token, not transformers'
  logit: the log says so."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import pytest

from backend.engine.model_runtime import ModelRuntime
from backend.engine.reranker import Reranker, rerank_refusal
from backend.gguf_file.gguf_header import read_gguf_header
from backend.settings import EngineSettings
from backend.settings.default_model import default_model_path
from quantize.convert import convert_hf_to_gguf
from tests.hub.gguf_writer import copy_with_metadata
from tests.tiny_bert import (  # noqa: F401  (session fixtures)
    HIDDEN,
    build_tiny_bert,
    reference_rerank,
    tiny_bert_folder,
    tiny_bert_gguf,
    tiny_reranker_folder,
    tiny_reranker_gguf,
)

pytestmark = pytest.mark.model

QUERY = "where does the river meet the sea"
DOCUMENTS = ["the river runs to the sea past the old lighthouse", "a cat sat on the mat"]


def _runtime(path: Path) -> Iterator[ModelRuntime]:
    settings = EngineSettings(model=str(path), ctx_size=256, parallel=1, threads=1)
    runtime = ModelRuntime(path, settings, n_seq_max=1)
    try:
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def reranker_runtime(tiny_reranker_gguf: Path) -> Iterator[ModelRuntime]:  # noqa: F811
    yield from _runtime(tiny_reranker_gguf)


def test_the_converted_reranker_has_a_head_and_no_pooling_type(
    tiny_reranker_gguf: Path,  # noqa: F811
) -> None:
    header = read_gguf_header(tiny_reranker_gguf)
    assert header.architecture == "bert"
    assert header.arch_get("pooling_type") is None
    assert header.arch_get("classifier.output_labels") == ["LABEL_0"]
    dense, output = header.tensor("cls.weight"), header.tensor("cls.output.weight")
    assert dense is not None and dense.shape == (HIDDEN, HIDDEN)
    assert output is not None and output.shape == (HIDDEN, 1)


def test_llama_cpp_ranks_with_it_declared_or_not(
    reranker_runtime: ModelRuntime,
    tiny_reranker_gguf: Path,  # noqa: F811
    tiny_reranker_folder: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    expected = reference_rerank(tiny_reranker_folder, QUERY, DOCUMENTS)
    reranker = Reranker(reranker_runtime)
    assert reranker.refusal is None and reranker.template is None
    pairs = reranker.format_pairs(QUERY, DOCUMENTS)
    assert pairs == [ids for ids, _ in expected]  # <s> q </s></s> d </s>, as transformers
    scores = reranker.score(pairs)
    assert reranker.pooling_type == llama_cpp.LLAMA_POOLING_TYPE_RANK
    # within test_rerank.py's TOLERANCE (llama.cpp rounds through f16 on the way)
    assert scores == pytest.approx([logit for _, logit in expected], abs=2e-2)
    reranker.close()

    declared = copy_with_metadata(
        tiny_reranker_gguf, tmp_path / "declared.gguf", {"bert.pooling_type": 4}
    )
    assert read_gguf_header(declared).arch_get("pooling_type") == 4
    for runtime in _runtime(declared):
        again = Reranker(runtime)
        assert again.refusal is None
        assert again.score(pairs) == pytest.approx(scores, abs=1e-6)
        assert again.pooling_type == llama_cpp.LLAMA_POOLING_TYPE_RANK
        again.close()


def test_models_that_are_not_rerankers_say_why(
    tiny_bert_gguf: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    for runtime in _runtime(tiny_bert_gguf):
        assert rerank_refusal(runtime) == (
            "it is an embedding model (bert): it serves /v1/embeddings; /v1/rerank needs a "
            "reranker GGUF such as bge-reranker or jina-reranker"
        )
    chat = default_model_path()
    for runtime in _runtime(chat):
        refusal = rerank_refusal(runtime)
        assert refusal is not None and refusal.startswith("it is a text generation model (llama)")
    headless = copy_with_metadata(chat, tmp_path / "rank.gguf", {"llama.pooling_type": 4})
    for runtime in _runtime(headless):
        assert rerank_refusal(runtime) == (
            "its GGUF declares rank pooling but holds no classification head "
            "(cls.output.weight or cls.weight) to score with"
        )


def test_a_converted_bert_classifier_scores_without_its_pooler(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    folder = build_tiny_bert(tmp_path / "bert-classifier", classifier=True)
    path = convert_hf_to_gguf(folder, tmp_path / "out", "F32").path
    header = read_gguf_header(path)
    assert header.tensor("cls.output.weight") is not None and header.tensor("cls.weight") is None
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = BertForSequenceClassification.from_pretrained(folder).eval()
    for runtime in _runtime(path):
        reranker = Reranker(runtime)
        assert reranker.refusal is None  # served, as llama-server serves it
        pairs = reranker.format_pairs(QUERY, DOCUMENTS)  # [CLS] q [SEP] d [SEP]
        assert pairs == [tokenizer(QUERY, d)["input_ids"] for d in DOCUMENTS]
        with caplog.at_level(logging.WARNING, logger="backend.engine.reranker"):
            scores = reranker.score(pairs)
        assert "drops BERT's pooler" in caplog.text
        for ids, score in zip(pairs, scores, strict=True):
            with torch.no_grad():  # llama.cpp gives every token type 0, as these calls do
                logit = float(model(torch.tensor([ids])).logits[0, 0])
                first = model.bert(torch.tensor([ids])).last_hidden_state[0, 0]
                unpooled = float(model.classifier(first)[0])
            assert score == pytest.approx(unpooled, abs=2e-2)
            assert abs(score - logit) > 0.1  # the pooler's dense + tanh is missing
        reranker.close()
