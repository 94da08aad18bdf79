"""POST /tokenize and /detokenize, as llama-server answers them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from backend.engine.engine import Engine
from backend.llama.tokens import detokenize, token_to_piece
from backend.server.auth import require_api_key
from backend.server.errors import ApiError
from backend.server.generation import off_loop, ready_engine

router = APIRouter(dependencies=[Depends(require_api_key)])

# Bytes one request may send to /tokenize.
MAX_CONTENT_BYTES = 8 * 1024 * 1024


class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: str = Field(description="Text to tokenise")
    add_special: bool = Field(False, description="Add BOS/EOS as the model's tokenizer does")
    parse_special: bool = Field(True, description="Turn special-token text into its token")
    with_pieces: bool = Field(False, description="Return {id, piece} objects instead of ids")


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    tokens: list[int] = Field(description="Token ids to turn back into text")


def ensure_utf8(text: str, param: str) -> str:
    """A 400 for text that is not valid Unicode (JSON can carry lone UTF-16 surrogates)."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise ApiError(
            400,
            f"{param} is not valid Unicode: lone surrogate at position {exc.start}",
            param=param,
        ) from None
    return text


def token_piece(engine: Engine, token: int) -> bytes:
    """The bytes of one token, special tokens rendered as their text (as llama-server does)."""
    return token_to_piece(engine.runtime.vocab, token, special=True)


def check_token_ids(engine: Engine, tokens: list[int], param: str) -> None:
    vocab = engine.runtime.n_vocab
    bad = [t for t in tokens if not 0 <= t < vocab]
    if bad:
        raise ApiError(
            400, f"token id {bad[0]} is out of range: ids must be in 0..{vocab - 1}", param=param
        )


@router.post("/tokenize", response_model=dict[str, Any])
async def tokenize(body: TokenizeRequest, request: Request) -> JSONResponse:
    engine = ready_engine(request)
    if len(body.content) > MAX_CONTENT_BYTES:
        raise ApiError(
            400, f"content is longer than {MAX_CONTENT_BYTES} characters", param="content"
        )
    # tokenising megabytes and writing a million ids as JSON take seconds: off the loop
    return await off_loop(lambda: JSONResponse(_tokenize(engine, body)))


def _tokenize(engine: Engine, body: TokenizeRequest) -> dict[str, Any]:
    content = ensure_utf8(body.content, "content")
    tokens = engine.tokenize(
        content, add_special=body.add_special, parse_special=body.parse_special
    )
    if not body.with_pieces:
        return {"tokens": tokens}
    pieces: list[dict[str, Any]] = []
    for token in tokens:
        raw = token_piece(engine, token)
        try:
            piece: str | list[int] = raw.decode()
        except UnicodeDecodeError:  # part of a multi-byte character: give the bytes
            piece = list(raw)
        pieces.append({"id": token, "piece": piece})
    return {"tokens": pieces}


@router.post("/detokenize")
async def detokenize_route(body: DetokenizeRequest, request: Request) -> dict[str, Any]:
    engine = ready_engine(request)

    def run() -> dict[str, Any]:
        check_token_ids(engine, body.tokens, "tokens")
        return {"content": detokenize(engine.runtime.vocab, body.tokens, special=True)}

    return await off_loop(run)
