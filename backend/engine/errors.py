"""Engine errors; the server maps each to an OpenAI-style status and body."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class EngineError(QuantDeskError):
    """Root of engine errors."""


class ModelLoadError(EngineError):
    """The GGUF could not be loaded or a context could not be created."""


class ContextOverflowError(EngineError):
    """Prompt + max_tokens can never fit in the context."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class QueueFullError(EngineError):
    """Every sequence is busy and the wait queue is full."""

    retry_after_s: int = 1


class InvalidRequestError(EngineError):
    """A request parameter is invalid (bad grammar, bad logit bias, ...)."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ModelCannotGenerateError(InvalidRequestError):
    """The model cannot generate text (an embedding model); it serves embeddings only."""


class EngineStoppedError(EngineError):
    """The engine has shut down or crashed."""


class GrammarDeadEndError(EngineError):
    """No token can continue a sequence's grammar: that sequence fails, the others go on."""
