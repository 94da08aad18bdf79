"""benchmarks/gpu (the GPU check kit, issue 21) without building llama.cpp: the scripts parse,
the source trim, the wheel plan and its coverage check, the kit's skip rules and summary,
and the server pieces of its steps against real servers (ours with the embedded SmolLM2; the
peer llama-server when benchmarks/build_llama_server.sh has built it)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks.gpu import carry_source, carry_wheels, kit_deps, kit_summary, stats_probe
from benchmarks.gpu.kit import Kit
from benchmarks.gpu.kit_env import ROOT, KitPaths
from benchmarks.gpu.kit_plan import DRY_RUN, Plan
from benchmarks.gpu.step_common import (
    ServeKnobs,
    fit_json,
    llama_server_spec,
    ours_spec,
    serving,
    small_load,
)
from benchmarks.gpu.step_oversize import try_serve
from benchmarks.peer_servers import DEFAULT_LLAMA_SERVER

GPU_DIR = ROOT / "benchmarks" / "gpu"
DRY_RUN_RESULTS = ROOT / "benchmarks" / "results" / "gpu-kit-dryrun"


@pytest.mark.parametrize("script", ["prepare.sh", "run.sh"])
def test_the_scripts_parse(script: str) -> None:
    res = subprocess.run(["bash", "-n", str(GPU_DIR / script)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_run_sh_without_an_output_folder_prints_its_usage() -> None:
    res = subprocess.run(["bash", str(GPU_DIR / "run.sh")], capture_output=True, text=True)
    assert res.returncode == 2 and "usage:" in res.stderr and "--dry-run" in res.stderr


def _touch(root: Path, *rels: str) -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rel)


def test_the_trim_keeps_what_the_build_reads_and_drops_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "llama.cpp"
    kept = (
        "CMakeLists.txt",
        "convert_hf_to_gguf.py",
        "gguf-py/gguf/__init__.py",
        "conversion/base.py",
        "ggml/src/ggml.c",
        "ggml/src/ggml-cpu/ggml-cpu.c",
        "ggml/src/ggml-cuda/ggml-cuda.cu",
        "ggml/src/ggml-rpc/ggml-rpc.cpp",
        "tools/server/server.cpp",
        "tools/ui/CMakeLists.txt",
        "src/llama.cpp",
    )
    dropped = (
        "docs/build.md",
        "models/ggml-vocab-llama.gguf",
        "tests/test-backend-ops.cpp",
        "ggml/src/ggml-vulkan/ggml-vulkan.cpp",
        "ggml/src/ggml-metal/ggml-metal.m",
        "tools/ui/src/app.svelte",
        "tools/server/tests/unit/test_basic.py",
        "gguf-py/gguf/__pycache__/x.pyc",
    )
    _touch(src, *kept, *dropped)
    dest = tmp_path / "carry" / "llama.cpp"
    gone = carry_source.copy_trimmed(src, dest)
    assert all((dest / rel).is_file() for rel in kept)
    assert not any((dest / rel).exists() for rel in dropped)
    assert {"docs", "models", "tests", "ggml/src/ggml-vulkan", "tools/ui/src"} <= set(gone)
    assert carry_source.tree_bytes(dest) == sum(len(rel) for rel in kept)


def _wheel(folder: Path, name: str, requires: list[str]) -> Path:
    path = folder / f"{name}-1.0-py3-none-any.whl"
    meta = f"Metadata-Version: 2.1\nName: {name}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}-1.0.dist-info/METADATA", meta)
    return path


def test_coverage_names_requirements_neither_carried_nor_in_the_image(tmp_path: Path) -> None:
    wheels = [
        _wheel(tmp_path, "fastapi", ["starlette>=0.40", "pydantic>=2", "anyio"]),
        _wheel(tmp_path, "starlette", ["anyio>=3", "httpx; extra == 'full'"]),
        _wheel(tmp_path, "pydantic", ["typing_extensions", "annotated-types>=0.6"]),
        _wheel(tmp_path, "oldlib", ["tomli; python_version < '3.11'"]),
    ]
    # anyio and typing-extensions are in the image; the extra and the marker do not apply
    assert kit_deps.coverage(wheels) == {"pydantic-1.0-py3-none-any.whl": ["annotated-types>=0.6"]}
    wheels.append(_wheel(tmp_path, "annotated_types", []))
    assert kit_deps.coverage(wheels) == {}


def test_the_wheel_plan_carries_what_the_image_lacks_or_has_too_old() -> None:
    plan = carry_wheels.plan(Path(sys.executable), ROOT)
    carry = plan["carry"]
    assert isinstance(carry, dict) and isinstance(plan["image"], list)
    # the server's stack is not in the GPU image; huggingface_hub is, but 1.x
    assert {"fastapi", "uvicorn", "pydantic", "pydantic-core", "sse-starlette"} <= set(carry)
    assert "huggingface-hub" in carry and "huggingface-hub" in plan["conflicts"]  # type: ignore[operator]
    assert {"numpy", "psutil", "jinja2"} <= set(plan["image"])
    assert "llama-cpp-python" not in carry and "quantdesk" not in carry


def _paths(tmp_path: Path) -> KitPaths:
    return KitPaths(
        root=ROOT,
        carry=tmp_path / "carry",
        build=tmp_path / "build",
        work=tmp_path / "work",
        out=tmp_path / "out",
        python=Path(sys.executable),
        dry_run=True,
    )


def test_the_kit_records_failures_skips_what_depends_on_them_and_keeps_its_budget(
    tmp_path: Path,
) -> None:
    plan = Plan(**{**DRY_RUN.__dict__, "budget_s": 1000, "min_s": {"slow": 5000}})
    kit = Kit(_paths(tmp_path), plan)
    kit.paths.out.mkdir(parents=True)
    kit.paths.logs.mkdir(parents=True)

    def broken(_timeout: float) -> dict[str, Any]:
        raise RuntimeError("no GPU here")

    kit.step("a", lambda _t: {"ok": True, "figure": 1})
    kit.step("b", broken)
    kit.step("c", lambda _t: {"ok": True}, needs=("a", "b"))
    kit.step("slow", lambda _t: {"ok": True})
    kit.step("d", lambda _t: {"ok": False, "error": "ratio too low"}, needs=("a",))
    status = {r.name: (r.status, r.reason) for r in kit.records}
    assert status["a"] == ("passed", None)
    assert status["b"] == ("failed", "RuntimeError: no GPU here")
    assert status["c"] == ("skipped", "needs b, which did not pass")
    assert status["slow"][0] == "skipped" and "time budget" in str(status["slow"][1])
    assert status["d"] == ("failed", "ratio too low")
    written = json.loads((kit.paths.out / "gpu_kit.json").read_text())
    assert [s["name"] for s in written["steps"]] == ["a", "b", "c", "slow", "d"]
    summary = (kit.paths.out / "summary.txt").read_text()
    assert summary.splitlines()[-1] == "1 passed, 2 failed, 2 skipped"


def test_the_committed_dry_run_summary_is_the_summary_of_its_json() -> None:
    data = json.loads((DRY_RUN_RESULTS / "gpu_kit.json").read_text())
    assert data["mode"] == "dry-run"
    assert kit_summary.summary(data) == (DRY_RUN_RESULTS / "summary.txt").read_text()
    for name in ("gpu_kit.json", "summary.txt", "logs.txt"):
        text = (DRY_RUN_RESULTS / name).read_text()
        assert str(ROOT) not in text and str(Path.home()) not in text, f"machine paths in {name}"


# --- the server pieces, on real servers ------------------------------------------------------
def _knobs(model: Path, ngl: int = 0) -> ServeKnobs:
    return ServeKnobs(model, threads=2, parallel=2, ctx=1024, batch=256, ubatch=128, ngl=ngl)


@pytest.mark.model
def test_fit_json_and_our_server_answer_with_the_kits_flags(
    tmp_path: Path, smollm2_path: Path
) -> None:
    paths = _paths(tmp_path)
    paths.logs.mkdir(parents=True)
    sk = _knobs(smollm2_path)
    fit = fit_json(paths, sk)
    assert fit["verdict"] == "fits" and fit["exit_code"] == 0 and fit["kv_bytes"] > 0
    spec = ours_spec(paths, sk)
    assert "--spec-type" in spec.command(sk.knobs(), 1) and "-ngl" in spec.command(sk.knobs(), 1)
    with (
        serving(spec, sk, paths.logs / "ours.log", 120) as (url, _proc),
        stats_probe.sampling(url, every_s=0.2) as samples,
    ):
        load = small_load(url, concurrency=2, max_tokens=16, prompt_tokens=32)
    assert load["errors"] == 0 and load["tokens_per_s"] > 0
    judged = stats_probe.judge(samples, parallel=2, expect_gpu=False)
    assert judged["checks"]["kv_cells_within_total"] and judged["checks"]["running_within_slots"]
    # no GPU here: /v1/stats must say so rather than show numbers
    assert judged["checks"]["no_gpu_note_in_stats"] and judged["gpu_note"]


@pytest.mark.model
@pytest.mark.skipif(not DEFAULT_LLAMA_SERVER.is_file(), reason="benchmarks/build_llama_server.sh")
def test_the_peer_llama_server_takes_the_same_knobs(tmp_path: Path, smollm2_path: Path) -> None:
    paths = KitPaths(**{**_paths(tmp_path).__dict__, "build": DEFAULT_LLAMA_SERVER.parents[1]})
    paths.logs.mkdir(parents=True)
    sk = _knobs(smollm2_path, ngl=-1)
    argv = llama_server_spec(paths, sk).command(sk.knobs(), 1)
    assert argv[argv.index("-ngl") + 1] == "99" and argv[argv.index("-np") + 1] == "2"
    with serving(llama_server_spec(paths, sk), sk, paths.logs / "peer.log", 120) as (url, _):
        load = small_load(url, concurrency=2, max_tokens=16, prompt_tokens=32)
    assert load["errors"] == 0 and load["tokens_per_s"] > 0


@pytest.mark.model
def test_a_context_too_big_for_ram_is_refused_with_a_message(
    tmp_path: Path, smollm2_path: Path
) -> None:
    paths = _paths(tmp_path)
    paths.logs.mkdir(parents=True)
    # 1M cells of f32 KV for SmolLM2 (~47 GB) cannot fit under the dry run's 12 GiB limit
    sk = ServeKnobs(smollm2_path, 2, 1, 1_048_576, 512, 512, -1, cache_type="f32")
    assert fit_json(paths, sk)["verdict"] == "wont_fit"
    outcome = try_serve(paths, sk, timeout_s=120)
    assert outcome["verdict"] == "clear_refusal", outcome
    assert outcome["exit_code"] > 0 and outcome["error_lines"]
