"""Errors of the llama.cpp binding layer."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class LlamaError(QuantDeskError):
    """Root of the errors raised by the llama.cpp bindings."""


class TokenizeError(LlamaError):
    """llama.cpp could not tokenise a text."""
