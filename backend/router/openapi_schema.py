"""The router's OpenAPI schema: its own routes, and the routes it hands to the model a
request names, described as a model's server describes them (the router forwards those
bodies unchanged, so their shapes are the server's)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from backend.server.app_factory import create_app
from backend.settings import EngineSettings, ServerSettings


def router_schema(
    router_app: FastAPI, defaults: EngineSettings, server: ServerSettings
) -> dict[str, Any]:
    """The merged schema; where both describe a path, the router's own description wins
    (``/v1/models`` lists the library, ``/health`` takes ``?model=``)."""
    served = create_app(defaults, server).openapi()  # builds no engine
    own = router_app.openapi()
    schema = dict(own)
    schema["paths"] = {**served.get("paths", {}), **own.get("paths", {})}
    components = dict(served.get("components", {}))
    for kind, entries in own.get("components", {}).items():
        components[kind] = {**components.get(kind, {}), **entries}
    schema["components"] = components
    return schema
