"""Ollama's API (``/api/*``): its request and answer shapes, translated to chat's."""
