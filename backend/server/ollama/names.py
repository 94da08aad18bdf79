"""Model names as Ollama's clients write them: ``name:tag``, the tag ``latest`` when none
is given. Ours become ``{id}:latest`` in Ollama's lists; any name with ``:latest`` (or no
tag) reaches the model of that id, and a name with another tag is looked up whole (a
library file named ``model:Q4_K_M`` is unusual, but ``repo:Q4_K_M`` may be one)."""

from __future__ import annotations

LATEST = ":latest"


def ollama_name(model_id: str) -> str:
    """The name Ollama's lists show for one of our models."""
    return model_id if ":" in model_id.rsplit("/", 1)[-1] else model_id + LATEST


def served_name(name: str) -> str:
    """The model id an Ollama name means: ``:latest`` dropped."""
    return name[: -len(LATEST)] if name.casefold().endswith(LATEST) else name
