"""The models the Server page offers, and a one-line description of each."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from backend.core.errors import QuantDeskError
from backend.settings.default_model import DEFAULT_MODEL_ID, default_model_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelChoice:
    label: str
    value: str  # 'default' or a path
    source: str  # 'embedded', 'library' or 'recent'


def library_paths() -> list[Path]:
    """Loadable GGUF files of the local library (reads every header: call it off the GUI
    thread); none if the library can't be read."""
    from backend.hub.library import ModelLibrary  # huggingface_hub: not at window start-up

    try:
        entries = ModelLibrary().entries()
    except (QuantDeskError, OSError) as exc:
        log.warning("could not read the model library: %s", exc)
        return []
    return [
        Path(e.path)
        for e in entries
        if e.format == "gguf" and not e.error and e.source != "embedded"
    ]


def model_choices(recent: list[str], library: list[Path]) -> list[ModelChoice]:
    """Embedded default first, then the library (as :func:`library_paths` scanned it),
    then recently opened files."""
    choices = [ModelChoice(f"{DEFAULT_MODEL_ID} (embedded)", "default", "embedded")]
    seen = {"default"}
    for path in library:
        if str(path) not in seen:
            seen.add(str(path))
            choices.append(ModelChoice(path.name, str(path), "library"))
    for item in recent:
        if item not in seen and Path(item).is_file():
            seen.add(item)
            choices.append(ModelChoice(Path(item).name, item, "recent"))
    return choices


def resolve(value: str) -> Path | None:
    try:
        return default_model_path() if value in ("", "default") else Path(value)
    except QuantDeskError:
        return None


@dataclass(frozen=True)
class ModelFacts:
    path: Path
    size_bytes: int
    architecture: str = "?"
    quant: str | None = None
    n_layer: int = 0
    n_ctx_train: int | None = None
    params: int = 0
    capabilities: tuple[str, ...] = ()  # Ollama's names, from the header and projector


@lru_cache(maxsize=32)
def _header(path: str, mtime_ns: int, size: int) -> Any:
    from backend.gguf_file.gguf_header import read_gguf_header

    return read_gguf_header(path)


def cached_header(path: Path) -> Any:
    """The GGUF header of ``path``, read once per (path, mtime, size)."""
    st = path.stat()
    return _header(str(path), st.st_mtime_ns, st.st_size)


def model_facts(value: str) -> ModelFacts | None:
    """Size and header facts of a model, or None if it can't be read."""
    path = resolve(value)
    if path is None or not path.is_file():
        return None
    size = path.stat().st_size
    try:
        header = cached_header(path)
        return ModelFacts(
            path,
            size,
            header.architecture,
            header.file_type_name,
            header.block_count,
            header.context_length,
            header.parameter_count,
            _capabilities(path, header),
        )
    except (ImportError, QuantDeskError, OSError, ValueError) as exc:
        log.debug("could not read GGUF header of %s: %s", path, exc)
        return ModelFacts(path, size)


def _capabilities(path: Path, header: Any) -> tuple[str, ...]:
    from backend.gguf_file.model_capabilities import header_capabilities
    from backend.gguf_file.projector_file import mmproj_beside, projector_modalities

    projector = mmproj_beside(path)
    modalities = projector_modalities(projector) if projector else {}
    return tuple(header_capabilities(header, modalities))


def describe(facts: ModelFacts) -> str:
    from backend.core.units import human_bytes

    parts = [human_bytes(facts.size_bytes)]
    if facts.params:
        parts.append(
            f"{facts.params / 1e9:.2f} B params"
            if facts.params >= 1e9
            else f"{facts.params / 1e6:.0f} M params"
        )
    if facts.quant:
        parts.append(facts.quant)
    if facts.architecture != "?":
        parts.append(facts.architecture)
    if facts.n_layer:
        parts.append(f"{facts.n_layer} layers")
    if facts.n_ctx_train:
        parts.append(f"trained ctx {facts.n_ctx_train:,}")
    if extra := [c for c in facts.capabilities if c != "completion"]:
        parts.append(", ".join(extra))
    return " · ".join(parts)
