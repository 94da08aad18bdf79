"""Which models the router can serve: the GGUF files of the library, plus the ``-m`` ones.

A request's ``model`` is matched as the single server matches it: the id, the file name or
its stem, in any case (people type model names into IDE plugin settings by hand).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from backend.gguf_file.model_capabilities import EMBEDDING_ARCHITECTURES, file_facts
from backend.gguf_file.projector_file import mmproj_beside, projector_modalities
from backend.hub.library import ModelLibrary, describe_gguf
from backend.router.errors import UnknownModelError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatalogEntry:
    model_id: str
    path: Path
    size_bytes: int
    architecture: str | None = None  # from the GGUF header (None: not read, or unreadable)
    mmproj: str | None = None  # the projector beside it: the model reads images or audio

    def modalities(self) -> dict[str, bool]:
        """What it reads besides text (``/props``' shape), as far as the files say."""
        if self.mmproj is None:
            return {"vision": False, "audio": False}
        return projector_modalities(self.path.parent / self.mmproj)

    def facts(self) -> tuple[list[str], int | None]:
        """Its capabilities (Ollama's names) and trained context length, from its files."""
        return file_facts(self.path, self.modalities())

    def names(self) -> set[str]:
        return {n.casefold() for n in (self.model_id, self.path.name, self.path.stem)}

    @property
    def model_type(self) -> str:
        """``embeddings`` for an embedding-only model, else ``llm`` (LM Studio's names)."""
        return "embeddings" if self.architecture in EMBEDDING_ARCHITECTURES else "llm"


class ModelCatalog:
    """The servable models by id; rescans the library when asked for a name it lacks."""

    def __init__(self, library: ModelLibrary | None, extra: list[CatalogEntry] | None = None):
        self._library = library
        self._extra = list(extra or [])
        self._entries: dict[str, CatalogEntry] = {}
        self.refresh()

    @property
    def library(self) -> ModelLibrary | None:
        return self._library

    def refresh(self) -> None:
        """Scan the library again. The header facts of a file are read once per (path,
        size, mtime) (``backend.hub.library``'s cache): a poll of /v1/models re-reads only a
        file that changed."""
        entries: dict[str, CatalogEntry] = {e.model_id: _described(e) for e in self._extra}
        if self._library is not None:
            for item in self._library.entries():
                if item.format != "gguf" or item.error:
                    continue
                path = Path(item.path)
                if item.name not in entries and all(e.path != path for e in self._extra):
                    entries[item.name] = CatalogEntry(
                        item.name, path, item.size_bytes, item.architecture, item.mmproj
                    )
        self._entries = entries

    def entries(self) -> list[CatalogEntry]:
        return list(self._entries.values())

    def ids(self) -> list[str]:
        return list(self._entries)

    def get(self, model_id: str) -> CatalogEntry | None:
        """The entry of exactly ``model_id`` (no name matching, no rescan)."""
        return self._entries.get(model_id)

    def _match(self, model: str) -> CatalogEntry | None:
        if model in self._entries:
            return self._entries[model]
        wanted = model.casefold().removesuffix(".gguf")
        for entry in self._entries.values():
            if model.casefold() in entry.names() or wanted in entry.names():
                return entry
        return None

    def find(self, model: str | None) -> CatalogEntry:
        """The entry ``model`` names; a 404 that lists the ids when none does. A library of
        one model answers to any name, as a single-model server does: IDE plugins ship
        preset names (``gpt-4o``) that a user can't always change."""
        if model:
            entry = self._match(model)
            if entry is None:
                self.refresh()  # a model downloaded since the last scan
                entry = self._match(model)
            if entry is not None:
                return entry
        if len(self._entries) == 1:
            return next(iter(self._entries.values()))
        shown = ", ".join(sorted(self._entries)) or "none"
        what = f"the model '{model}' does not exist" if model else "the request names no model"
        raise UnknownModelError(f"{what}; this server serves: {shown}")


def _described(entry: CatalogEntry) -> CatalogEntry:
    """A ``-m`` file (maybe outside the library) with its header's architecture."""
    try:
        item = describe_gguf(
            entry.path, name=entry.model_id, source="local", repo_id=None, removable=False
        )
    except OSError as exc:
        log.warning("cannot read %s: %s", entry.path, exc)
        return entry
    projector = mmproj_beside(entry.path)
    return replace(
        entry,
        size_bytes=item.size_bytes,
        architecture=item.architecture,
        mmproj=projector.name if projector else None,
    )
