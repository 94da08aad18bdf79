"""Request and response bodies of POST /v1/rerank: the Jina/Cohere shape llama-server
answers, and its TEI variant (``texts`` in, a bare list of ``{index, score}`` out)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RerankRequest(BaseModel):
    """A query and the documents to rank against it; unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str | None = Field(None, description="The reranker to use (any id it is served as)")
    query: str = Field(description="The text the documents are ranked against")
    documents: list[str] | None = Field(
        None, description="The texts to rank (Jina/Cohere); the answer is a results list"
    )
    texts: list[str] | None = Field(
        None,
        description="The texts to rank, in Hugging Face TEI's shape: the answer is a bare list",
    )
    top_n: int | None = Field(
        None, ge=1, description="Answer only the best top_n documents (default: all)"
    )
    return_documents: bool = Field(False, description="Echo each document's text in results")
    return_text: bool = Field(False, description="TEI: echo each text in the answer")


class RerankDocument(BaseModel):
    text: str


class RerankResult(BaseModel):
    index: int = Field(description="The document's position in the request")
    relevance_score: float = Field(
        description="The reranker's raw score (a logit): higher is more relevant"
    )
    document: RerankDocument | None = Field(None, description="Present with return_documents")


class RerankUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class RerankResponse(BaseModel):
    """Results sorted by relevance, best first."""

    model: str
    object: Literal["list"] = "list"
    usage: RerankUsage
    results: list[RerankResult]


class TeiRerankResult(BaseModel):
    """One item of the TEI-shaped answer (a request with ``texts``)."""

    index: int
    score: float
    text: str | None = None
