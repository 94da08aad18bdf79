"""What a model can do, in Ollama's capability names, derived in one place for every
dialect: ``/api/show`` and ``/api/tags``, ``/v1/models``, ``/props``, the router's catalog
and the GUI's model pickers.

- ``completion``: it generates text (it has a KV cache); ``embedding``: it embeds (an
  encoder architecture, or a declared pooling type);
- ``tools``: its chat template renders tools; ``thinking``: its template knows a reasoning
  block (``<think>``, ``enable_thinking``, ``reasoning_content``);
- ``insert``: fill-in-the-middle tokens (``/infill``, ``suffix``);
- ``vision``, ``audio``: its projector reads images or hears audio.
"""

from __future__ import annotations

import functools
from pathlib import Path

from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import GGUFHeader, read_gguf_header

# Architectures whose llama.cpp context has no KV cache and that embed: they serve
# /v1/embeddings only (the engine finds the same from the context: no memory, not diffusion).
EMBEDDING_ARCHITECTURES = frozenset(
    {
        "bert",
        "modern-bert",
        "nomic-bert",
        "nomic-bert-moe",
        "neo-bert",
        "jina-bert-v2",
        "jina-bert-v3",
        "eurobert",
        "gemma-embedding",
    }
)
THINKING_MARKS = ("<think>", "enable_thinking", "reasoning_content", "<|channel|>analysis")
_FIM_KEYS = ("fim_pre_token_id", "fim_suf_token_id", "fim_mid_token_id")


def capabilities(
    *,
    generates: bool,
    embeds: bool,
    template: str | None,
    fim: bool,
    modalities: dict[str, bool],
) -> list[str]:
    """Ollama's capability list for a model with these facts."""
    out: list[str] = []
    if generates:
        out.append("completion")
        source = template or ""
        if "tools" in source:
            out.append("tools")
        if fim:
            out.append("insert")
        if any(mark in source for mark in THINKING_MARKS):
            out.append("thinking")
    if embeds:
        out.append("embedding")
    out += [name for name in ("vision", "audio") if modalities.get(name)]
    return out


def header_capabilities(
    header: GGUFHeader, modalities: dict[str, bool], template: str | None = None
) -> list[str]:
    """:func:`capabilities` from a GGUF header alone (a model not loaded): FIM tokens as
    the header declares them; ``template`` overrides the header's chat template."""
    arch = header.architecture
    encoder = arch in EMBEDDING_ARCHITECTURES
    pooling = header.arch_get("pooling_type")
    embeds = encoder or (isinstance(pooling, int) and pooling in (1, 2, 3))
    return capabilities(
        generates=not encoder,
        embeds=embeds,
        template=template if template is not None else header.chat_template,
        fim=all(header.get(f"tokenizer.ggml.{k}") is not None for k in _FIM_KEYS),
        modalities=modalities,
    )


@functools.lru_cache(maxsize=256)
def _file_facts(
    path: str, size: int, mtime_ns: int, vision: bool, audio: bool
) -> tuple[tuple[str, ...], int | None]:
    header = read_gguf_header(Path(path))
    caps = header_capabilities(header, {"vision": vision, "audio": audio})
    return tuple(caps), header.context_length


def file_facts(path: Path, modalities: dict[str, bool]) -> tuple[list[str], int | None]:
    """A GGUF file's capabilities and trained context length, read once per file version;
    ([], None) when the file cannot be read."""
    try:
        stat = path.stat()
        caps, ctx = _file_facts(
            str(path),
            stat.st_size,
            stat.st_mtime_ns,
            modalities.get("vision", False),
            modalities.get("audio", False),
        )
    except (OSError, GGUFFormatError):
        return [], None
    return list(caps), ctx
