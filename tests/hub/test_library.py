"""The local library: listing from headers, the embedded model, safe deletion, CLI list/rm/fit."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from backend.core.errors import ModelNotFoundError
from backend.entrypoints.main import main
from backend.gguf_file.gguf_header import read_gguf_header
from backend.hub.download_manager import pull
from backend.hub.errors import LibraryError
from backend.hub.library import ModelLibrary
from tests.hub.conftest import GGUF_FILE, GGUF_REPO, ST_REPO, VISION_REPO
from tests.hub.gguf_writer import U64, tiny_gemma2, tiny_llama, write_gguf
from tests.hub.hub_stand_in import HubStandIn


def test_embedded_model_is_listed_and_protected(smollm2_path: Path, isolated_home: Path) -> None:
    library = ModelLibrary()
    assert library.root == (isolated_home / "models").resolve()
    [embedded] = library.entries()
    assert embedded.source == "embedded" and not embedded.removable
    assert Path(embedded.path) == smollm2_path
    assert library.find("default") == embedded
    with pytest.raises(LibraryError, match="embedded default model"):
        library.delete("default")
    with pytest.raises(LibraryError, match="outside the model library"):
        library.delete_path(smollm2_path)
    assert smollm2_path.is_file()


def test_downloads_are_listed_from_gguf_and_safetensors_headers(
    hub: HubStandIn, smollm2_path: Path, tiny_safetensors: tuple[Path, int]
) -> None:
    pull(GGUF_REPO)
    pull(ST_REPO)
    entries = {e.name: e for e in ModelLibrary().entries()}
    gguf = entries[f"test-org--SmolLM2-135M-Instruct-GGUF/{GGUF_FILE[:-5]}"]
    header = read_gguf_header(smollm2_path)
    assert gguf.format == "gguf" and gguf.source == "download" and gguf.repo_id == GGUF_REPO
    assert gguf.architecture == header.architecture == "llama"
    assert gguf.parameter_count == header.parameter_count
    assert gguf.context_length == header.context_length
    assert gguf.file_type == "Q4_1" and gguf.has_chat_template
    assert gguf.bits_per_weight == pytest.approx(
        8 * header.tensor_bytes / header.parameter_count, abs=1e-3
    )
    assert gguf.size_bytes == smollm2_path.stat().st_size

    st = entries["test-org--tiny-llama-safetensors"]
    _, params = tiny_safetensors
    assert st.format == "safetensors" and st.repo_id == ST_REPO
    assert st.architecture == "LlamaForCausalLM" and st.context_length == 2048
    assert st.parameter_count == params and st.bits_per_weight == 16.0
    assert st.file_type == "FLOAT16" and st.has_chat_template


def test_local_files_quant_outputs_and_bad_files(isolated_home: Path) -> None:
    root = ModelLibrary().root
    (root / "quantized").mkdir()
    tiny_gemma2(root / "quantized" / "tiny-gemma2-F16.gguf")
    (root / "broken.gguf").write_bytes(b"GGUF" + b"\x03\0\0\0" + b"\x01" * 10)
    (root / ".downloads").mkdir()
    (root / ".downloads" / "partial.gguf").write_bytes(b"GGUF")
    entries = {e.name: e for e in ModelLibrary().entries()}
    assert set(entries) == {"SmolLM2-135M-Instruct", "quantized/tiny-gemma2-F16", "broken"}
    local = entries["quantized/tiny-gemma2-F16"]
    assert (
        local.source == "local" and local.architecture == "gemma2" and not local.has_chat_template
    )
    assert entries["broken"].error is not None and entries["broken"].architecture is None


def test_delete_removes_only_inside_the_library(
    hub: HubStandIn, tmp_path: Path, isolated_home: Path
) -> None:
    [path] = pull(GGUF_REPO)
    library = ModelLibrary()
    outside = tmp_path / "outside.gguf"
    shutil.copy(path, outside)
    with pytest.raises(LibraryError, match="outside the model library"):
        library.delete_path(outside)
    # a link inside the library that points outside is refused too
    link = library.root / "linked.gguf"
    link.symlink_to(outside)
    with pytest.raises(LibraryError, match="outside the model library"):
        library.delete("linked")
    assert outside.is_file()
    link.unlink()

    removed = library.delete(GGUF_FILE)
    assert removed == [path] and not path.exists()
    assert not path.parent.exists()  # the emptied repo folder went too
    with pytest.raises(ModelNotFoundError):
        library.find(GGUF_FILE)


def test_split_gguf_is_one_entry_and_deleted_whole(isolated_home: Path) -> None:
    root = ModelLibrary().root
    parts = []
    for index in (1, 2):
        path = root / f"big-Q8_0-{index:05d}-of-00002.gguf"
        meta = {
            "general.architecture": "llama",
            "llama.block_count": 2,
            "split.no": index - 1,
            "split.count": 2,
        }
        tensors = {f"blk.{index - 1}.attn_q.weight": ([64, 64], "f16")}
        parts.append(write_gguf(path, meta, tensors))
    [entry] = [e for e in ModelLibrary().entries() if e.source == "local"]
    assert entry.name == "big-Q8_0-00001-of-00002"
    assert entry.parameter_count == 2 * 64 * 64
    assert entry.size_bytes == sum(p.stat().st_size for p in parts)
    assert ModelLibrary().delete(entry.name) == parts
    assert not any(p.exists() for p in parts)


def test_models_dir_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "elsewhere"))
    assert ModelLibrary().root == (tmp_path / "elsewhere").resolve()


def test_cli_list_rm_and_fit(
    hub: HubStandIn, capsys: pytest.CaptureFixture[str], smollm2_path: Path
) -> None:
    pull(GGUF_REPO)
    assert main(["models", "list", "--json"]) == 0
    names = [e["name"] for e in json.loads(capsys.readouterr().out)]
    assert names[0] == "SmolLM2-135M-Instruct" and len(names) == 2
    assert main(["models", "list"]) == 0
    assert "(embedded)" in capsys.readouterr().out

    assert (
        main(
            [
                "models",
                "fit",
                "default",
                "-c",
                "8192",
                "-ctk",
                "q8_0",
                "-ctv",
                "q8_0",
                "-np",
                "2",
                "--json",
            ]
        )
        == 0
    )
    fit = json.loads(capsys.readouterr().out)
    for key in ("weights_bytes", "kv_bytes", "compute_bytes", "total_bytes", "verdict"):
        assert key in fit
    assert fit["verdict"] in ("fits", "partial_offload", "wont_fit")
    assert fit["kv_cells"] == 8192 and fit["cache_type_k"] == "q8_0"
    header = read_gguf_header(smollm2_path)
    # q8_0: 34 bytes per 32 values; 30 layers x 3 kv heads x 64 dims, K and V
    assert fit["kv_bytes"] == 2 * 30 * 8192 * (3 * 64 // 32 * 34) == fit["kv_k_bytes"] * 2
    assert fit["weights_bytes"] >= header.tensor_bytes

    assert main(["models", "fit", GGUF_FILE[:-5]]) == 0
    assert "verdict:" in capsys.readouterr().out

    assert main(["models", "rm", "default"]) == 1
    assert "cannot be deleted" in capsys.readouterr().err
    assert main(["models", "rm", GGUF_FILE]) == 0
    assert "deleted" in capsys.readouterr().out
    assert main(["models", "fit", "no-such-model"]) == 3


def test_a_split_model_with_missing_parts_says_so(isolated_home: Path) -> None:
    root = ModelLibrary().root
    meta = {"general.architecture": "llama", "split.no": 0, "split.count": 3}
    write_gguf(
        root / "part-Q4_0-00001-of-00003.gguf", meta, {"blk.0.attn_q.weight": ([64, 64], "f16")}
    )
    [entry] = [e for e in ModelLibrary().entries() if e.source == "local"]
    assert entry.error is not None
    assert "2 of 3 parts missing" in entry.error and "part-Q4_0-00002-of-00003.gguf" in entry.error


def test_a_checkpoint_with_missing_shards_says_so(
    isolated_home: Path, tiny_safetensors: tuple[Path, int]
) -> None:
    """An interrupted multi-file download must not look like a complete model."""
    st_path, _ = tiny_safetensors
    folder = ModelLibrary().root / "org--sharded"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    shutil.copy(st_path, folder / "model-00001-of-00002.safetensors")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    [entry] = [e for e in ModelLibrary().entries() if e.format == "safetensors"]
    assert entry.error is not None and "1 of 2 weight shards missing" in entry.error
    shutil.copy(st_path, folder / "model-00002-of-00002.safetensors")
    [entry] = [e for e in ModelLibrary().entries() if e.format == "safetensors"]
    assert entry.error is None


def _nested_arrays(depth: int) -> bytes:
    """A GGUF whose one metadata value is an array in an array in ... ``depth`` deep."""
    key = b"crafted.nested"
    array, u32 = 9, 4
    return (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<I", array)
        + struct.pack("<IQ", array, 1) * (depth - 1)
        + struct.pack("<IQ", u32, 0)
    )


def _with_metadata(path: Path, **changes: object) -> Path:
    """Rewrite the tiny GGUF at ``path`` with some metadata values replaced."""
    header = read_gguf_header(path)
    metadata = {**header.metadata, **{k.replace("__", "."): v for k, v in changes.items()}}
    tensors = {
        t.name: (list(t.shape), "f32" if t.type.name == "F32" else "f16") for t in header.tensors
    }
    return write_gguf(path, metadata, tensors)


def _crafted_library(root: Path, smollm2_path: Path) -> dict[str, Path]:
    """Files that once crashed the listing or 'fit' (or passed as complete), by name."""
    nested = root / "nested.gguf"
    nested.write_bytes(_nested_arrays(5_000))
    cut = root / "cut-download.gguf"
    with smollm2_path.open("rb") as fh:
        cut.write_bytes(fh.read(read_gguf_header(smollm2_path).data_offset + (1 << 20)))
    layers = _with_metadata(
        tiny_llama(root / "many-layers.gguf", n_layer=2), llama__block_count=U64(2**40)
    )
    typed = _with_metadata(
        tiny_llama(root / "typed.gguf", n_layer=2), llama__context_length=[4096, 4096]
    )
    return {"nested": nested, "cut-download": cut, "many-layers": layers, "typed": typed}


def test_crafted_and_damaged_files_are_one_line_each_and_the_rest_is_listed(
    isolated_home: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 14.8: one bad file lost the whole listing (CLI and the GUI's library scan)."""
    root = ModelLibrary().root
    tiny_gemma2(root / "good-F16.gguf")
    bad = _crafted_library(root, smollm2_path)
    entries = {e.name: e for e in ModelLibrary().entries()}
    assert set(entries) == {"SmolLM2-135M-Instruct", "good-F16", *bad}
    assert entries["good-F16"].error is None and entries["good-F16"].architecture == "gemma2"
    assert entries["SmolLM2-135M-Instruct"].error is None
    for name in bad:
        error = entries[name].error
        assert error is not None and error.startswith("unreadable: "), (name, error)
        assert "\n" not in error and entries[name].architecture is None
    assert "truncated" in str(entries["cut-download"].error)
    assert "nested" in str(entries["nested"].error)

    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    for name in bad:
        [row] = [i for i, line in enumerate(out) if line.startswith(name + " ")]
        assert out[row + 1].strip().startswith("unreadable: "), out[row + 1]
    assert main(["models", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(entries)


def test_fit_of_a_crafted_or_cut_file_is_one_line_and_a_failure(
    isolated_home: Path, smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 14.8: MemoryError and RecursionError tracebacks; a cut file 'fits' with exit 0."""
    bad = _crafted_library(ModelLibrary().root, smollm2_path)
    for name, path in bad.items():
        for model in (str(path), name):  # a path, and a library name
            code = main(["models", "fit", model])
            captured = capsys.readouterr()
            assert code != 0, (name, captured.out)
            assert "verdict" not in captured.out
            assert captured.err.startswith("quantdesk: error: "), (name, captured.err)
            assert captured.err.count("\n") == 1, (name, captured.err)


def test_a_vision_model_comes_with_its_projector_and_is_one_library_entry(
    hub: HubStandIn, isolated_home: Path
) -> None:
    """Pulling a repo that ships mmproj files brings the F16 projector with the model; the
    library lists the model once, with the projector it reads images with."""
    paths = pull(VISION_REPO)
    assert [p.name for p in paths] == ["vision-Q4_1.gguf", "mmproj-vision-f16.gguf"]
    entries = [e for e in ModelLibrary().entries() if e.repo_id == VISION_REPO]
    assert [(Path(e.path).name, e.mmproj) for e in entries] == [
        ("vision-Q4_1.gguf", "mmproj-vision-f16.gguf")
    ]
    # naming the model file alone brings the projector too
    assert [p.name for p in pull(VISION_REPO, ["vision-Q4_1.gguf"])] == [p.name for p in paths]
