"""The local model library: GGUF files and HF safetensors folders under the models folder.

Entries are described from file headers only (GGUF header, safetensors JSON header,
config.json), never by loading a model. The embedded default model is always listed
and can never be deleted; nothing outside the library can be deleted either.
"""

from __future__ import annotations

import json
import logging
import shutil
import struct
from dataclasses import asdict, dataclass, replace
from math import prod
from pathlib import Path
from typing import Any, Literal

from backend.core.errors import ModelNotFoundError, QuantDeskError
from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import read_gguf_header
from backend.gguf_file.projector_file import is_projector, mmproj_beside
from backend.gguf_file.split_gguf import SPLIT_NAME, split_part_names
from backend.hub.errors import LibraryError
from backend.hub.hub_settings import HubSettings
from backend.hub.library_paths import PARTIAL_DIR, SOURCE_FILE
from backend.settings.default_model import DEFAULT_MODEL_ID, default_model_path

log = logging.getLogger(__name__)

# How an entry whose file cannot be read as a model says so (one line, the reason after it).
UNREADABLE = "unreadable: "

_SAFETENSORS_BITS = {
    "F64": 64,
    "F32": 32,
    "F16": 16,
    "BF16": 16,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "I64": 64,
    "I32": 32,
    "I16": 16,
    "I8": 8,
    "U8": 8,
    "BOOL": 8,
}


ModelFormat = Literal["gguf", "safetensors"]
# The embedded default model, a file pulled from the Hub, or one the user put there.
LibrarySource = Literal["embedded", "download", "local"]


@dataclass(frozen=True)
class LibraryEntry:
    """One model in the library."""

    name: str
    path: str
    size_bytes: int
    format: ModelFormat
    architecture: str | None
    parameter_count: int | None
    context_length: int | None
    file_type: str | None
    bits_per_weight: float | None
    has_chat_template: bool
    source: LibrarySource
    repo_id: str | None
    removable: bool
    error: str | None = None
    mmproj: str | None = None  # the projector beside it (mmproj*.gguf): it reads images

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _split_parts(path: Path) -> list[Path]:
    return [path.with_name(name) for name in split_part_names(path.name)]


@dataclass(frozen=True)
class _GGUFFacts:
    architecture: str | None
    parameter_count: int | None
    context_length: int | None
    file_type: str | None
    bits_per_weight: float | None
    has_chat_template: bool
    error: str | None


# Header facts by (path, size, mtime) of every part: listing a big library again is instant.
_FACTS_CACHE: dict[tuple[tuple[str, int, int], ...], _GGUFFacts] = {}


def _gguf_facts(parts: list[Path]) -> _GGUFFacts:
    key = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in parts)
    cached = _FACTS_CACHE.get(key)
    if cached is not None:
        return cached
    try:
        header = read_gguf_header(parts[0])
        params = header.parameter_count
        tensor_bytes = header.tensor_bytes
        for extra in parts[1:]:
            other = read_gguf_header(extra)
            params += other.parameter_count
            tensor_bytes += other.tensor_bytes
        facts = _GGUFFacts(
            architecture=header.architecture,
            parameter_count=params,
            context_length=header.context_length,
            file_type=header.file_type_name,
            bits_per_weight=round(8.0 * tensor_bytes / params, 3) if params else None,
            has_chat_template=header.chat_template is not None,
            error=None,
        )
    except GGUFFormatError as exc:  # the reader's only error, whatever the bytes
        facts = _GGUFFacts(None, None, None, None, None, False, f"{UNREADABLE}{exc}")
    _FACTS_CACHE[key] = facts
    return facts


def describe_gguf(
    path: Path, *, name: str, source: LibrarySource, repo_id: str | None, removable: bool
) -> LibraryEntry:
    """A library entry from a GGUF header (all split parts for split models)."""
    expected = _split_parts(path)
    parts = [p for p in expected if p.exists()] or [path]
    facts = _gguf_facts(parts)
    error = facts.error
    if len(parts) < len(expected):
        missing = [p.name for p in expected if not p.exists()]
        error = (
            f"split model incomplete: {len(missing)} of {len(expected)} parts missing "
            f"({_first_names(missing)}); download them all"
        )
    return LibraryEntry(
        name=name,
        path=str(path),
        size_bytes=sum(p.stat().st_size for p in parts),
        format="gguf",
        architecture=facts.architecture,
        parameter_count=facts.parameter_count,
        context_length=facts.context_length,
        file_type=facts.file_type,
        bits_per_weight=facts.bits_per_weight,
        has_chat_template=facts.has_chat_template,
        source=source,
        repo_id=repo_id,
        removable=removable,
        error=error,
    )


def _safetensors_stats(path: Path) -> tuple[int, int]:
    """(parameters, bits) counted from a .safetensors file's JSON header."""
    with path.open("rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        if length > 100 << 20:
            raise ValueError("safetensors header too large")
        header = json.loads(fh.read(length))
    params = bits = 0
    for key, info in header.items():
        if key == "__metadata__":
            continue
        n = prod(info["shape"]) if info["shape"] else 1
        params += n
        bits += n * _SAFETENSORS_BITS.get(str(info["dtype"]).upper(), 16)
    return params, bits


def _first_names(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")


def _missing_shards(folder: Path) -> str | None:
    """Why a sharded checkpoint is incomplete (an interrupted download), if it is: the
    shards its ``model.safetensors.index.json`` names that are not there."""
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return None
    shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
    missing = sorted(s for s in shards if not (folder / s).is_file())
    if not missing:
        return None
    return (
        f"incomplete: {len(missing)} of {len(shards)} weight shards missing "
        f"({_first_names(missing)}); download them all"
    )


def describe_safetensors(folder: Path, *, name: str, repo_id: str | None) -> LibraryEntry:
    """A library entry for an HF-format folder (config.json + *.safetensors)."""
    files = sorted(folder.glob("*.safetensors"))
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    error: str | None = None
    arch = ctx = dtype = None
    params = bits = 0
    has_template = (folder / "chat_template.jinja").exists() or (
        folder / "chat_template.json"
    ).exists()
    try:
        config = json.loads((folder / "config.json").read_text())
        archs = config.get("architectures") or [config.get("model_type")]
        arch = str(archs[0]) if archs and archs[0] else None
        ctx = config.get("max_position_embeddings") or config.get("text_config", {}).get(
            "max_position_embeddings"
        )
        dtype = config.get("torch_dtype") or config.get("dtype")
        tok_config = folder / "tokenizer_config.json"
        if tok_config.exists():
            has_template = has_template or bool(
                json.loads(tok_config.read_text()).get("chat_template")
            )
        for f in files:
            p, b = _safetensors_stats(f)
            params += p
            bits += b
        error = _missing_shards(folder)
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        error = f"cannot read {folder.name}: {exc}"
    return LibraryEntry(
        name=name,
        path=str(folder),
        size_bytes=size,
        format="safetensors",
        architecture=arch,
        parameter_count=params or None,
        context_length=int(ctx) if ctx else None,
        file_type=str(dtype).upper() if dtype else None,
        bits_per_weight=round(bits / params, 3) if params else None,
        has_chat_template=has_template,
        source="download" if repo_id else "local",
        repo_id=repo_id,
        removable=True,
        error=error,
    )


class ModelLibrary:
    """Lists, finds and deletes models under the library folder."""

    def __init__(self, settings: HubSettings | None = None) -> None:
        self.settings = settings or HubSettings.model_validate({})
        self.root = self.settings.library_dir()

    def _repo_of(self, path: Path) -> str | None:
        rel = path.relative_to(self.root)
        if len(rel.parts) < 2:
            return None
        record = self.root / rel.parts[0] / SOURCE_FILE
        try:
            repo_id = json.loads(record.read_text()).get("repo_id")
        except (OSError, ValueError):
            return None
        return str(repo_id) if repo_id else None

    def _name(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return rel[:-5] if rel.lower().endswith(".gguf") else rel

    def entries(self) -> list[LibraryEntry]:
        """The embedded default model first, then every model under the library folder."""
        result: list[LibraryEntry] = []
        try:
            embedded = default_model_path()
        except ModelNotFoundError:
            log.warning("the embedded default model is not installed")
        else:
            result.append(
                describe_gguf(
                    embedded,
                    name=DEFAULT_MODEL_ID,
                    source="embedded",
                    repo_id=None,
                    removable=False,
                )
            )
        found: list[LibraryEntry] = []
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root)
            if any(part.startswith(".") for part in rel.parts):
                continue  # partial downloads, source records
            try:
                entry = self._describe(path)
            except OSError as exc:  # deleted or moved since the scan saw it
                log.warning("skipped %s: %s", path, exc)
                continue
            if entry is not None:
                found.append(entry)
        return result + found

    def _describe(self, path: Path) -> LibraryEntry | None:
        """The entry of a GGUF file (the first part of a split one) or a safetensors folder."""
        if path.is_file() and path.suffix.lower() == ".gguf":
            match = SPLIT_NAME.match(path.name)
            if (match and int(match["index"]) != 1) or is_projector(path):
                return None  # a later part, or a projector: part of its model's entry
            repo_id = self._repo_of(path)
            projector = mmproj_beside(path)
            entry = describe_gguf(
                path,
                name=self._name(path),
                source="download" if repo_id else "local",
                repo_id=repo_id,
                removable=True,
            )
            return replace(entry, mmproj=projector.name) if projector else entry
        if path.is_dir() and (path / "config.json").is_file() and any(path.glob("*.safetensors")):
            return describe_safetensors(
                path, name=self._name(path), repo_id=self._repo_of(path / "config.json")
            )
        return None

    def find(self, name: str) -> LibraryEntry:
        """The entry whose name, file name, stem or path is ``name``."""
        entries = self.entries()
        wanted = name.removesuffix(".gguf")
        exact = [
            e
            for e in entries
            if e.name == wanted or e.path == name or (name == "default" and e.source == "embedded")
        ]
        if exact:
            return exact[0]
        by_stem = [
            e
            for e in entries
            if Path(e.path).name in (name, f"{wanted}.gguf") or Path(e.path).stem == wanted
        ]
        if len(by_stem) == 1:
            return by_stem[0]
        if len(by_stem) > 1:
            raise LibraryError(
                f"{name!r} matches several models: {', '.join(e.name for e in by_stem)}"
            )
        raise ModelNotFoundError(f"no model named {name!r} in the library ({self.root})")

    def resolve(self, model: str) -> Path:
        """A path for ``model``: an existing file, 'default', or a library name."""
        path = Path(model).expanduser()
        if path.is_file():
            return path.resolve()
        return Path(self.find(model).path)

    def delete(self, name: str) -> list[Path]:
        """Delete a library model (all split parts, or a safetensors folder)."""
        entry = self.find(name)
        target = Path(entry.path).resolve()
        if not entry.removable:
            raise LibraryError(f"{entry.name} is the embedded default model and cannot be deleted")
        self._check_inside(target)
        removed: list[Path] = []
        if target.is_dir():
            shutil.rmtree(target)
            removed.append(target)
        else:
            for part in _split_parts(target):
                if part.exists():
                    self._check_inside(part.resolve())
                    part.unlink()
                    removed.append(part)
        self._prune_empty(target.parent)
        log.info("deleted %s", ", ".join(str(p) for p in removed))
        return removed

    def delete_path(self, path: str | Path) -> list[Path]:
        """Delete by path; refuses anything outside the library folder."""
        resolved = Path(path).expanduser().resolve()
        self._check_inside(resolved)
        return self.delete(str(resolved))

    def _check_inside(self, path: Path) -> None:
        root = self.root.resolve()
        if path == root or not path.is_relative_to(root):
            raise LibraryError(
                f"refusing to delete {path}: it is outside the model library ({root})"
            )
        try:
            is_default = path.samefile(default_model_path())
        except (OSError, QuantDeskError):
            is_default = False
        if is_default:
            raise LibraryError("the embedded default model cannot be deleted")

    def _prune_empty(self, folder: Path) -> None:
        root = self.root.resolve()
        while folder != root and folder.is_relative_to(root):
            remaining = [p for p in folder.iterdir() if p.name != SOURCE_FILE]
            if remaining:
                return
            shutil.rmtree(folder)
            folder = folder.parent


__all__ = ["PARTIAL_DIR", "LibraryEntry", "ModelLibrary"]
