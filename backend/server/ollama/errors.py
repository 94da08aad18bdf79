"""Ollama's error shape, ``{"error": "..."}``, which every answer under ``/api/`` carries
(its Python client reads ``error``; its JS client only when the type is JSON)."""

from __future__ import annotations

OLLAMA_PREFIX = "/api/"


def is_ollama_path(path: str) -> bool:
    return path.startswith(OLLAMA_PREFIX)


def error_body(message: str) -> dict[str, object]:
    return {"error": message}
