"""Router errors: every one is answered as an OpenAI-shaped error body."""

from __future__ import annotations

from backend.core.errors import QuantDeskError


class RouterError(QuantDeskError):
    """Base class of the router's errors; ``status`` and ``code`` shape the HTTP answer."""

    status = 500
    code = "router_error"
    type_ = "server_error"
    param: str | None = None
    retry_after_s: int | None = None


class UnknownModelError(RouterError):
    """A request names no model of the library."""

    status = 404
    code = "model_not_found"
    type_ = "not_found_error"
    param = "model"


class ModelNotLoadedError(RouterError):
    """With --no-models-autoload, a request names a model that is not resident."""

    status = 404
    code = "model_not_loaded"
    type_ = "not_found_error"
    param = "model"


class InsufficientMemoryError(RouterError):
    """A model does not fit beside the busy or pinned ones, even after evicting idle ones."""

    status = 503
    code = "insufficient_memory"
    retry_after_s = 5


class ModelLoadFailedError(RouterError):
    """A model's server process could not start or load its model."""

    status = 503
    code = "model_load_failed"


class ModelCrashedError(RouterError):
    """A model's server process ended while it answered a request."""

    status = 502
    code = "model_crashed"


class ModelRequiredError(RouterError):
    """A request names no model and no rule picks one (several loaded, none preloaded)."""

    status = 400
    code = "model_required"
    type_ = "invalid_request_error"
    param = "model"
