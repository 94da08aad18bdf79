"""tests/model_cache.py: keys, reuse, rebuilds, pruning and a race, on tiny text files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests import model_cache
from tests.model_cache import MARKER, cache_key, cached_build, changes


@pytest.fixture(autouse=True)
def own_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests' folders stay out of the session's check for changed models."""
    monkeypatch.setattr(model_cache, "_handed_out", {})


class Builder:
    """A build that writes ``model.bin`` (and ``extra/mmproj.bin``) and counts its calls."""

    def __init__(self, text: str = "weights") -> None:
        self.text = text
        self.calls = 0

    def __call__(self, folder: Path) -> tuple[Path, Path]:
        self.calls += 1
        (folder / "extra").mkdir()
        model, mmproj = folder / "model.bin", folder / "extra" / "mmproj.bin"
        model.write_text(self.text)
        mmproj.write_text("projector")
        return model, mmproj


def folders(root: Path, name: str = "tiny") -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith(f"{name}-"))


def test_the_key_follows_sources_inputs_and_versions_not_places(tmp_path: Path) -> None:
    source, data = tmp_path / "builder.py", tmp_path / "input.gguf"
    source.write_text("SEED = 0\n")
    data.write_bytes(b"GGUF" + bytes(64))
    key = cache_key([source, data, "torch==2.13.0"], tmp_path)
    assert cache_key([source, data, "torch==2.13.0"], tmp_path) == key
    assert cache_key([source, data, "torch==2.14.0"], tmp_path) != key
    assert cache_key([data, source, "torch==2.13.0"], tmp_path) != key  # order counts
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "builder.py"
    moved.write_text("SEED = 0\n")
    assert cache_key([moved, data, "torch==2.13.0"], tmp_path) == key  # content, not place
    source.write_text("SEED = 1\n")
    assert cache_key([source, data, "torch==2.13.0"], tmp_path) != key
    source.write_text("SEED = 0\n")
    data.write_bytes(b"GGUF" + bytes(63) + b"\1")
    assert cache_key([source, data, "torch==2.13.0"], tmp_path) != key
    # a folder: its files' names and contents
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    before = cache_key([hf], tmp_path)
    (hf / "tokenizer.json").write_text("{}")
    assert cache_key([hf], tmp_path) != before


def test_a_big_files_digest_is_kept_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_cache, "BIG", 8)
    big = tmp_path / "model.gguf"
    big.write_bytes(b"A" * 64)
    first = model_cache.file_digest(big, tmp_path)
    [entry] = (tmp_path / ".digests").iterdir()
    stamp = entry.read_text().rsplit(" ", 1)[0]
    entry.write_text(f"{stamp} kept")  # what is kept is what is used
    assert model_cache.file_digest(big, tmp_path) == "kept"
    big.write_bytes(b"B" * 64)  # same size, new mtime: hashed again
    os.utime(big, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert model_cache.file_digest(big, tmp_path) not in ("kept", first)


def test_a_complete_folder_is_reused_without_building(tmp_path: Path) -> None:
    build = Builder()
    model, mmproj = cached_build("tiny", ["v1"], build, root=tmp_path)
    assert build.calls == 1
    [folder] = folders(tmp_path)
    assert (model, mmproj) == (folder / "model.bin", folder / "extra" / "mmproj.bin")
    assert model.read_text() == "weights" and (folder / MARKER).is_file()
    assert cached_build("tiny", ["v1"], build, root=tmp_path) == (model, mmproj)
    assert build.calls == 1
    # a dict of paths and a single path come back as they were returned
    named = cached_build("named", [], lambda f: {"a": Builder()(f)[0]}, root=tmp_path)
    assert cached_build("named", [], lambda f: {}, root=tmp_path) == named
    single = cached_build("single", [], lambda f: Builder()(f)[1], root=tmp_path)
    assert cached_build("single", [], lambda f: f, root=tmp_path) == single
    assert single.read_text() == "projector"


def test_an_incomplete_or_changed_folder_is_built_again(tmp_path: Path) -> None:
    build = Builder()
    model, _ = cached_build("tiny", ["v1"], build, root=tmp_path)
    (model.parent / MARKER).unlink()  # as a folder put there without one
    assert cached_build("tiny", ["v1"], build, root=tmp_path)[0] == model
    assert build.calls == 2
    assert changes() == []
    model.write_text("truncated")  # a test wrote into the cache
    assert changes() == [f"{model.parent}: model.bin"]
    assert cached_build("tiny", ["v1"], build, root=tmp_path)[0].read_text() == "weights"
    assert build.calls == 3
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_two_versions_a_name_are_kept(tmp_path: Path) -> None:
    paths = [cached_build("tiny", [f"v{i}"], Builder(), root=tmp_path)[0] for i in (1, 2)]
    assert folders(tmp_path) == sorted(p.parent for p in paths)
    for age, path in zip((3, 2), paths, strict=True):  # used hours ago
        os.utime(path.parent / MARKER, (time.time() - age * 3600,) * 2)
    cached_build("other", ["v1"], Builder(), root=tmp_path)  # another name counts apart
    newest = cached_build("tiny", ["v3"], Builder(), root=tmp_path)[0]
    assert folders(tmp_path) == sorted([paths[1].parent, newest.parent])
    assert len(folders(tmp_path, "other")) == 1
    # a folder used within the grace period stays even past the limit
    os.utime(paths[1].parent / MARKER)
    fourth = cached_build("tiny", ["v4"], Builder(), root=tmp_path)[0]
    assert folders(tmp_path) == sorted([paths[1].parent, newest.parent, fourth.parent])


def test_a_racing_second_builder_uses_the_winners_folder(tmp_path: Path) -> None:
    winner = Builder("winner's")

    def slow_build(folder: Path) -> tuple[Path, Path]:
        # another process builds the same key and renames it into place meanwhile
        cached_build("tiny", ["v1"], winner, root=tmp_path)
        return Builder("loser's")(folder)

    model, _ = cached_build("tiny", ["v1"], slow_build, root=tmp_path)
    [folder] = folders(tmp_path)
    assert model == folder / "model.bin" and model.read_text() == "winner's"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    def broken(folder: Path) -> Path:
        (folder / "half.bin").write_text("half")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        cached_build("tiny", [], broken, root=tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="subpath"):
        cached_build("tiny", [], lambda folder: tmp_path, root=tmp_path)
