"""The GUI's view of a library server (``quantdesk serve`` without ``-m``), without Qt:
which library id a chosen model has, the resident models from ``GET /v1/models`` as rows,
the per-model knobs, and the dashboard's "All models" snapshot."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.storage.app_settings import ServerKnobs
from backend.core.errors import QuantDeskError
from backend.core.units import human_bytes
from backend.engine.stats_model import StatsSnapshot
from backend.settings.default_model import DEFAULT_MODEL_ID
from backend.settings.model_settings_store import PER_MODEL_FIELDS

log = logging.getLogger(__name__)

# what the Server page remembers per model: the knobs that load and size it
MODEL_KNOBS = PER_MODEL_FIELDS


def library_root() -> Path | None:
    """The library folder ``quantdesk serve`` serves (None if it cannot be made)."""
    from backend.hub.library import ModelLibrary  # huggingface_hub: not at window start-up

    try:
        return ModelLibrary().root
    except (QuantDeskError, OSError) as exc:
        log.warning("could not open the model library: %s", exc)
        return None


def library_model_id(value: str, root: Path | None = None) -> str | None:
    """The id the library server knows the chosen model by: the embedded model's id for
    'default', a library file's name relative to the library folder without ``.gguf``;
    ``None`` for a file outside the library (the GUI serves that one alone)."""
    if value in ("", "default"):
        return DEFAULT_MODEL_ID
    root = root if root is not None else library_root()
    if root is None:
        return None
    path = Path(value).expanduser()
    try:  # the folders resolved, not the file: a library file may be a link to elsewhere
        rel = (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None
    if not path.is_file() or not rel.lower().endswith(".gguf"):
        return None
    return rel[:-5]


def library_path(model_id: str, root: Path | None = None) -> str | None:
    """The file a library id names, as the Server page's picker holds it ('default' for the
    embedded model); ``None`` if the library cannot be read. The inverse of
    :func:`library_model_id`."""
    if model_id == DEFAULT_MODEL_ID:
        return "default"
    root = root if root is not None else library_root()
    return None if root is None else str(root / f"{model_id}.gguf")


def model_overrides(knobs: ServerKnobs) -> dict[str, Any]:
    """The knobs remembered for the served model (``ModelSettingsStore``)."""
    return {name: getattr(knobs, name) for name in MODEL_KNOBS}


def with_model_overrides(knobs: ServerKnobs, stored: dict[str, Any]) -> ServerKnobs:
    """``knobs`` with a model's remembered knobs on top (a value that no longer validates
    is left out)."""
    update = {k: v for k, v in stored.items() if k in MODEL_KNOBS}
    try:
        return ServerKnobs.model_validate({**knobs.model_dump(), **update})
    except ValueError as exc:
        log.warning("ignoring remembered settings that no longer apply: %s", exc)
        return knobs


def library_change_note(
    running: ServerKnobs,
    shown: ServerKnobs,
    chosen_id: str | None,
    resident: set[str],
    remembered: dict[str, Any],
    restart_note: str,
) -> str | None:
    """What the Status box says when the Server page's knobs differ from what a library
    server runs (``None``: nothing differs that matters; show what it serves).

    A knob of the whole server (where it listens, its key) needs a restart. The model and
    its own knobs do not: another library model loads beside the others, and a resident
    model's changed knobs apply when it loads again. ``remembered``: the chosen model's
    knobs as last remembered (what it loaded with)."""
    server_wide = [f for f in ServerKnobs.model_fields if f not in MODEL_KNOBS and f != "model"]
    if any(getattr(running, f) != getattr(shown, f) for f in server_wide):
        return restart_note
    if chosen_id is None:
        return "This file is outside the library: Restart serves it alone, in place of the library."
    name = chosen_id.rsplit("/", 1)[-1]
    if chosen_id not in resident:
        return (
            f"{name} is not loaded: Load (Resident models) puts it beside the others, with "
            "these settings."
        )
    loaded_with = with_model_overrides(running, remembered)
    if any(getattr(loaded_with, f) != getattr(shown, f) for f in MODEL_KNOBS):
        return f"Settings changed: press Restart to apply them, or Unload and Load {name}."
    return None


# -- the resident models ------------------------------------------------------------------

RESIDENT_COLUMNS = ("Model", "State", "Memory", "Idle", "In flight")


@dataclass(frozen=True)
class ModelCard:
    """One entry of ``GET /v1/models`` from a library server."""

    id: str
    state: str  # unloaded, loading, loaded or failed
    pinned: bool = False
    in_flight: int = 0
    memory_bytes: int | None = None
    idle_s: float | None = None
    error: str | None = None
    vision: bool | None = None  # it reads images (None: the server does not say)
    capabilities: tuple[str, ...] = ()  # Ollama's names (tools, vision...), as served

    def tags(self) -> str:
        """What the model can do beyond completing text, for a picker: ``tools, vision``."""
        return ", ".join(c for c in self.capabilities if c != "completion")

    @classmethod
    def of(cls, card: dict[str, Any]) -> ModelCard:
        status = card.get("status")
        state = str(status.get("value", "loaded")) if isinstance(status, dict) else "loaded"
        if isinstance(status, dict) and status.get("failed"):  # llama-server's way to say it
            state = "failed"
        memory = card.get("memory_bytes")
        idle = card.get("idle_s")
        error = status.get("error") if isinstance(status, dict) else None
        return cls(
            id=str(card.get("id", "?")),
            state=state,
            pinned=bool(card.get("pinned", False)),
            in_flight=int(card.get("in_flight") or 0),
            memory_bytes=int(memory) if isinstance(memory, int | float) else None,
            idle_s=float(idle) if isinstance(idle, int | float) else None,
            error=str(error) if error else None,
            vision=_vision(card),
            capabilities=_capabilities(card),
        )


def parse_models(body: object) -> list[ModelCard]:
    """The cards of a ``/v1/models`` body (a single server's too: its one model, loaded)."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return []
    return [ModelCard.of(card) for card in data if isinstance(card, dict)]


def resident_rows(cards: list[ModelCard], acted_on: set[str]) -> list[ModelCard]:
    """The rows of the Server page's table: models loading, loaded or failed, and those the
    user loaded or unloaded here (so an unload shows as 'unloaded' rather than vanishing)."""
    return [c for c in cards if c.state != "unloaded" or c.id in acted_on]


def idle_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def resident_cells(card: ModelCard) -> list[str]:
    """The texts of a card's row, in :data:`RESIDENT_COLUMNS` order: the model by its file's
    name (the table's tooltip has the id with its folders), 'pinned' beside its state."""
    return [
        card.id.rsplit("/", 1)[-1],
        f"{card.state}, pinned" if card.pinned else card.state,
        human_bytes(card.memory_bytes) if card.memory_bytes else "–",
        idle_text(card.idle_s) if card.state == "loaded" else "–",
        str(card.in_flight),
    ]


# -- "All models" on the dashboard ----------------------------------------------------------


def combine_snapshots(snapshots: list[StatsSnapshot]) -> StatsSnapshot | None:
    """One snapshot for every loaded model together: requests, tokens, KV cells, prefix-cache
    counts and the servers' memory and CPU added up, latency the worst of them; the model and
    machine sections are the first model's (the machine is the same)."""
    if not snapshots:
        return None
    if len(snapshots) == 1:
        return snapshots[0]
    first = snapshots[0]

    def total(section: str, name: str) -> Any:
        return sum(getattr(getattr(s, section), name) for s in snapshots)

    def worst(name: str) -> float | None:
        values = [getattr(s.latency, name) for s in snapshots]
        present = [v for v in values if v is not None]
        return max(present) if present else None

    requests = first.requests.model_copy(
        update={n: total("requests", n) for n in type(first.requests).model_fields}
    )
    tokens = first.tokens.model_copy(
        update={n: total("tokens", n) for n in type(first.tokens).model_fields}
    )
    latency = first.latency.model_copy(
        update={n: worst(n) for n in type(first.latency).model_fields}
    )
    kv_numbers = ("cells_used", "cells_total", "bytes_used", "bytes_total")
    kv_update: dict[str, Any] = {n: total("kv", n) for n in kv_numbers}
    cells = kv_update["cells_total"]
    kv_update["used_pct"] = 100.0 * kv_update["cells_used"] / cells if cells else 0.0
    prefix = first.prefix_cache.model_copy(
        update={n: total("prefix_cache", n) for n in type(first.prefix_cache).model_fields}
    )
    tiers = first.session_cache.model_copy(
        update={
            tier: getattr(first.session_cache, tier).model_copy(
                update={
                    n: sum(getattr(getattr(s.session_cache, tier), n) for s in snapshots)
                    for n in type(getattr(first.session_cache, tier)).model_fields
                }
            )
            for tier in ("ram", "disk")
        }
    )
    system = first.system.model_copy(
        update={
            "rss_bytes": sum(s.system.rss_bytes for s in snapshots),
            "cpu_pct": sum(s.system.cpu_pct for s in snapshots),
        }
    )
    model = first.model.model_copy(update={"id": f"{len(snapshots)} models"})
    return first.model_copy(
        update={
            "requests": requests,
            "tokens": tokens,
            "latency": latency,
            "kv": first.kv.model_copy(update=kv_update),
            "prefix_cache": prefix,
            "session_cache": tiers,
            "system": system,
            "model": model,
            "uptime_s": max(s.uptime_s for s in snapshots),
            "ready": all(s.ready for s in snapshots),
        }
    )


def _capabilities(card: dict[str, Any]) -> tuple[str, ...]:
    caps = card.get("capabilities")
    return tuple(str(c) for c in caps) if isinstance(caps, list) else ()


def _vision(card: dict[str, Any]) -> bool | None:
    modalities = card.get("modalities")
    if not isinstance(modalities, dict):
        meta = card.get("meta")
        modalities = meta.get("modalities") if isinstance(meta, dict) else None
    return bool(modalities.get("vision")) if isinstance(modalities, dict) else None
