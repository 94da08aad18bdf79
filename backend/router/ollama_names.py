"""Ollama names in the router: ``name[:latest]`` is a library model's id, and
``hf.co/{owner}/{repo}[:{quant}]`` (Ollama's name for a Hugging Face GGUF) is the library
model pulled from that repo whose file carries that quantisation (default: Q4_K_M, or
the repo's only GGUF)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.hub.library import ModelLibrary
from backend.server.ollama.names import served_name

HF_PREFIXES = ("hf.co/", "huggingface.co/")
DEFAULT_QUANT = "Q4_K_M"
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True)
class HubName:
    repo_id: str
    quant: str | None  # None: Ollama's default (latest)


def hub_name(name: str) -> HubName | None:
    """``hf.co/owner/repo[:quant]`` parsed; None for any other name."""
    lowered = name.casefold()
    prefix = next((p for p in HF_PREFIXES if lowered.startswith(p)), None)
    if prefix is None:
        return None
    repo, _, tag = name[len(prefix) :].partition(":")
    if not _REPO.match(repo):
        return None
    return HubName(repo, None if tag in ("", "latest") else tag)


def quant_matches(filename: str, quant: str) -> bool:
    """Whether a GGUF file name carries ``quant`` (``Q4_K_M`` in ``x-Q4_K_M.gguf``)."""
    stem = filename.rsplit("/", 1)[-1].removesuffix(".gguf").casefold()
    return re.search(rf"(^|[^a-z0-9]){re.escape(quant.casefold())}($|[^a-z0-9])", stem) is not None


def library_id(library: ModelLibrary | None, name: str) -> str:
    """The model id an Ollama name means in ``library`` (unchanged when nothing matches:
    the catalog's lookup then says it is unknown)."""
    hub = hub_name(name)
    if hub is None or library is None:
        return served_name(name)
    pulled = [
        e
        for e in library.entries()
        if e.repo_id is not None and e.repo_id.casefold() == hub.repo_id.casefold()
    ]
    wanted = [e for e in pulled if quant_matches(e.path, hub.quant or DEFAULT_QUANT)]
    if not wanted and hub.quant is None and len(pulled) == 1:
        wanted = pulled
    return wanted[0].name if wanted else served_name(name)
