"""Requests to a library server's model routes (``POST /models/load``, ``/models/unload``,
``GET /v1/models``). Plain Python that blocks: pages run these in a ``ThreadWorker``."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx

from app.page_models.router_models import ModelCard, parse_models
from backend.core.errors import QuantDeskError

log = logging.getLogger(__name__)

# a load answers once the model is ready: big models take minutes to read from disk
LOAD_TIMEOUT = httpx.Timeout(10.0, read=900.0)


class RouterRequestError(QuantDeskError):
    """A model request failed; the message is the server's own, for the user. ``code`` is
    the OpenAI error code (``insufficient_memory``, ``model_load_failed``...)."""

    def __init__(self, message: str, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.status = status


def _headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def error_of(response: httpx.Response) -> RouterRequestError:
    """The OpenAI-shaped error body of ``response`` as a :class:`RouterRequestError`."""
    try:
        body = json.loads(response.read())
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict):
            return RouterRequestError(
                str(error.get("message") or error), error.get("code"), response.status_code
            )
        message = str(body.get("detail") if isinstance(body, dict) else body)
    except (ValueError, AttributeError):
        message = response.text[:300]
    return RouterRequestError(f"HTTP {response.status_code}: {message}", None, response.status_code)


def _post(base_url: str, api_key: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    try:
        response = httpx.post(
            f"{base_url}{path}", json=body, headers=_headers(api_key), timeout=LOAD_TIMEOUT
        )
    except httpx.ConnectError as exc:
        raise RouterRequestError("Cannot reach the server. Is it running?") from exc
    except httpx.HTTPError as exc:
        raise RouterRequestError(f"The server did not answer: {exc}") from exc
    if response.status_code != 200:
        raise error_of(response)
    answer: dict[str, Any] = response.json()
    return answer


def load_model(base_url: str, api_key: str, model: str, pin: bool | None = None) -> dict[str, Any]:
    """Load ``model`` (returns once it is ready); ``pin`` pins or unpins it."""
    body: dict[str, Any] = {"model": model}
    if pin is not None:
        body["pin"] = pin
    return _post(base_url, api_key, "/models/load", body)


def unload_model(base_url: str, api_key: str, model: str) -> dict[str, Any]:
    """Unload ``model``: its server process exits and gives its memory back."""
    return _post(base_url, api_key, "/models/unload", {"model": model})


def list_models(client: httpx.Client) -> list[ModelCard]:
    """Every model the server offers, with its state (``client`` has the base URL and key)."""
    response = client.get("/v1/models")
    if response.status_code != 200:
        raise error_of(response)
    return parse_models(response.json())
