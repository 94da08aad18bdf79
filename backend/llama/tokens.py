"""Tokenise, detokenise and render tokens with a llama.cpp vocabulary (buffers resized on
demand)."""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt

from backend.llama.errors import TokenizeError

_PIECE_BUFFER = 64


def tokenize(
    vocab: Any, data: bytes, *, add_special: bool, parse_special: bool
) -> npt.NDArray[np.int32]:
    """The tokens of UTF-8 ``data`` as an int32 array."""
    capacity = len(data) + 8
    buf = (llama_cpp.llama_token * capacity)()
    n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, capacity, add_special, parse_special)
    if n < 0:  # the buffer was too small: -n tokens are needed
        capacity = -n
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(
            vocab, data, len(data), buf, capacity, add_special, parse_special
        )
    if n < 0:
        raise TokenizeError(f"llama.cpp could not tokenise {len(data)} bytes (code {n})")
    return np.ctypeslib.as_array(buf)[:n]


def token_to_piece(vocab: Any, token: int, *, special: bool = False) -> bytes:
    """The bytes ``token`` renders to; control tokens render empty unless ``special``."""
    buf = ctypes.create_string_buffer(_PIECE_BUFFER)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    if n < 0:  # the buffer was too small: -n bytes are needed
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, special)
    return buf.raw[:n]


def detokenize(vocab: Any, tokens: list[int], *, special: bool) -> str:
    """The text of ``tokens`` through ``llama_detokenize``; special tokens render as their
    text when ``special``. Invalid UTF-8 (a character cut in two) is replaced."""
    if not tokens:
        return ""
    ids = (llama_cpp.llama_token * len(tokens))(*tokens)
    capacity = max(_PIECE_BUFFER, len(tokens) * 8)
    buf = ctypes.create_string_buffer(capacity)
    n = llama_cpp.llama_detokenize(vocab, ids, len(tokens), buf, capacity, False, special)
    if n < 0:  # the buffer was too small: -n bytes are needed
        capacity = -n
        buf = ctypes.create_string_buffer(capacity)
        n = llama_cpp.llama_detokenize(vocab, ids, len(tokens), buf, capacity, False, special)
    if n < 0:
        raise TokenizeError(f"llama.cpp could not detokenise {len(tokens)} tokens (code {n})")
    return buf.raw[:n].decode(errors="replace")
