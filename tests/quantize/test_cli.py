"""``quantdesk quantize`` end to end, as the GUI runs it (a child process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from backend.jobs.events import ProgressEvent, parse_event


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend.entrypoints.main", "quantize", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_jsonl_to_library(tiny_f16: Path, isolated_home: Path) -> None:
    proc = _cli(str(tiny_f16), "--type", "Q8_0", "--type", "q4_0", "--progress-jsonl")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert all(e["type"] == "progress" for e in events[:-1])
    assert {"stage", "done", "total", "message"} <= set(events[0])
    # one phase per type, numbered in order, as the GUI reads them
    progress = [parse_event(line) for line in proc.stdout.splitlines()[:-1]]
    phases = {
        (e.phase, e.phases, e.message.split("]")[0])
        for e in progress
        if isinstance(e, ProgressEvent)
    }
    assert phases == {(0, 2, "[Q8_0"), (1, 2, "[Q4_0")}
    result = events[-1]
    assert result["type"] == "result"
    paths = [Path(o["path"]) for o in result["outputs"]]
    models = isolated_home / "models"
    assert paths == [models / "tiny-llama-Q8_0.gguf", models / "tiny-llama-Q4_0.gguf"]
    assert all(p.is_file() for p in paths)
    # the new outputs appear in the library
    from backend.hub.library import ModelLibrary

    listed = {Path(e.path) for e in ModelLibrary().entries()}
    assert set(paths) <= listed


def test_cli_unknown_type(tiny_f16: Path, tmp_path: Path) -> None:
    proc = _cli(str(tiny_f16), "--type", "Q9_9", "--out", str(tmp_path))
    assert proc.returncode == 2
    assert "unknown quantisation type 'Q9_9'" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_non_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "notes.gguf"
    fake.write_text("hello")
    proc = _cli(str(fake), "--type", "Q8_0", "--out", str(tmp_path / "out"), "--progress-jsonl")
    assert proc.returncode != 0
    assert "not a GGUF file" in proc.stderr
    last = json.loads(proc.stdout.splitlines()[-1])
    assert last["type"] == "error" and "not a GGUF file" in last["message"]


def test_cli_missing_source(tmp_path: Path) -> None:
    proc = _cli(str(tmp_path / "nothing-here"), "--type", "Q8_0")
    assert proc.returncode != 0
    assert "no such file or folder" in proc.stderr


def test_cli_hf_folder_with_calibration(
    tiny_hf_model: Path, tmp_path: Path, business_prompts: list[str]
) -> None:
    calibration = tmp_path / "prompts.txt"
    calibration.write_text("\n".join(business_prompts[:30]), encoding="utf-8")
    out = tmp_path / "out"
    proc = _cli(
        str(tiny_hf_model),
        "--type",
        "IQ4_XS",
        "--out",
        str(out),
        "--calibration",
        str(calibration),
        "--imatrix-ctx",
        "64",
        "--threads",
        "2",
    )
    assert proc.returncode == 0, proc.stderr
    imatrix = out / "tiny-llama.imatrix"
    assert imatrix.is_file()
    side = json.loads((out / "tiny-llama-IQ4_XS.gguf.json").read_text())
    assert side["imatrix"] == str(imatrix)
    assert side["type"] == "IQ4_XS"
    # the intermediate F16 from the one conversion is kept (a reference for comparisons)
    assert (out / "tiny-llama-F16.gguf").is_file()
    assert str(out / "tiny-llama-IQ4_XS.gguf") in proc.stdout
    # reuse the saved imatrix on the F16 for another type
    proc2 = _cli(
        str(out / "tiny-llama-F16.gguf"),
        "--type",
        "Q3_K_M",
        "--out",
        str(out),
        "--imatrix",
        str(imatrix),
    )
    assert proc2.returncode == 0, proc2.stderr
    side2 = json.loads((out / "tiny-llama-Q3_K_M.gguf.json").read_text())
    assert side2["imatrix"] == str(imatrix)


def test_cli_hub_repo_id_goes_through_the_hub(tmp_path: Path) -> None:
    # tests run with HF_HUB_OFFLINE=1: the hub module must refuse with a readable message
    proc = _cli("someone/some-model", "--type", "Q8_0", "--out", str(tmp_path))
    assert proc.returncode != 0
    assert "offline" in proc.stderr.lower()
    assert list(tmp_path.iterdir()) == []
