"""benchmarks/router_compare.py: its command lines, library, ratios and plot without a model;
then one tiny real run of both routers (needs the llama-server that
benchmarks/build_llama_server.sh builds)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from backend.entrypoints.main import build_parser
from backend.hub.hub_settings import HubSettings
from backend.hub.library import ModelLibrary
from backend.router.model_catalog import ModelCatalog
from backend.settings import EngineSettings, RouterSettings
from backend.settings.flags import settings_from_args
from benchmarks import router_compare, router_report
from benchmarks.peer_servers import DEFAULT_LLAMA_SERVER, Knobs
from benchmarks.router_library import build_library, isolated_env
from benchmarks.router_servers import BASELINE, OURS, router_specs

SHARED = ("-np", "-t", "-tb", "-c", "-b", "-ub", "--models-max", "--models-dir")


def _flag_values(argv: list[str]) -> dict[str, str]:
    return {flag: argv[argv.index(flag) + 1] for flag in SHARED}


def test_both_routers_get_the_same_knobs_and_ours_serves_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QUANTDESK_MODEL", raising=False)
    knobs = Knobs(tmp_path / "lib", threads=2, parallel=3, ctx=1536, batch=256, ubatch=128)
    ours, theirs = (s.command(knobs, 8080) for s in router_specs(tmp_path / "llama-server", 2))
    assert _flag_values(ours) == _flag_values(theirs)
    assert _flag_values(ours)["--models-dir"] == str(tmp_path / "lib")
    assert theirs[0] == str(tmp_path / "llama-server") and "-m" not in theirs
    # our CLI takes the command line as router mode: no -m, the flags as given
    args = build_parser().parse_args(ours[3:])
    assert args.command == "serve" and getattr(args, "models", []) == []
    engine = settings_from_args(EngineSettings, args)
    assert (engine.parallel, engine.ctx_size, engine.threads) == (3, 1536, 2)
    assert settings_from_args(RouterSettings, args).models_max == 2
    with pytest.raises(SystemExit):
        router_compare.parse_args(["--models-max", "1"])
    assert router_compare.parse_args([]).passes == 3


def test_the_library_names_a_model_as_llama_server_does(tmp_path: Path, smollm2_path: Path) -> None:
    other = tmp_path / "src" / "Other-Q8_0.gguf"
    other.parent.mkdir()
    shutil.copyfile(smollm2_path, other)
    models = tmp_path / "models"
    ids = build_library(models, [smollm2_path, other])
    # llama-server names a top-level NAME.gguf of --models-dir NAME
    assert ids == [smollm2_path.name.removesuffix(".gguf"), "Other-Q8_0"]
    assert sorted(p.name for p in models.iterdir()) == sorted([smollm2_path.name, other.name])
    catalog = ModelCatalog(ModelLibrary(HubSettings(models_dir=models)))
    for model_id in ids:
        assert catalog.find(model_id).model_id == model_id
    with pytest.raises(ValueError, match="distinct"):
        build_library(tmp_path / "again", [other, other])


def test_isolated_env_hides_settings_and_restores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUANTDESK_CTX_SIZE", "99")
    monkeypatch.setenv("LLAMA_ARG_THREADS", "7")
    before = dict(os.environ)
    with isolated_env(tmp_path / "home", tmp_path / "cache"):
        assert "QUANTDESK_CTX_SIZE" not in os.environ and "LLAMA_ARG_THREADS" not in os.environ
        assert os.environ["QUANTDESK_HOME"] == str(tmp_path / "home")
        assert os.environ["LLAMA_CACHE"] == str(tmp_path / "cache")
    assert dict(os.environ) == before


def _figures(tps: float, ttft: float, rss: int) -> dict[str, Any]:
    return {
        "tokens_per_s": tps,
        "cold_switch_ttft_ms": ttft,
        "warm_ttft_ms": ttft / 10,
        "rss_both_bytes": rss,
        "rss_one_bytes": rss // 2,
    }


def test_paired_ratios_table_and_plot(tmp_path: Path) -> None:
    passes: list[dict[str, Any]] = [
        {"pass": 1, OURS: _figures(110, 900, 600 << 20), BASELINE: _figures(100, 1000, 400 << 20)},
        {"pass": 2, OURS: _figures(120, 800, 600 << 20), BASELINE: _figures(100, 1000, 400 << 20)},
        {"pass": 3, OURS: _figures(90, 1200, 600 << 20), BASELINE: _figures(100, 1000, 400 << 20)},
    ]
    passes[2][OURS]["tokens_per_s"] = None  # a pass with errors has no figure
    figures = router_report.summary(passes)
    tps = figures["tokens_per_s"]["ratio_ours_over_llama_server"]
    assert tps["ratios"] == [1.1, 1.2] and tps["median"] == pytest.approx(1.15)
    assert tps["interval"][0] <= tps["median"] <= tps["interval"][1]
    assert tps["share_at_least_one"] == 1.0
    cold = figures["cold_switch_ttft_ms"]
    assert cold["ratio_ours_over_llama_server"]["ratios"] == [0.9, 0.8, 1.2]
    assert cold["median"] == {OURS: 900.0, BASELINE: 1000.0}
    assert figures["rss_both_bytes"]["ratio_ours_over_llama_server"]["median"] == 1.5
    assert figures["rss_one_bytes"]["unit"] == "bytes"
    text = router_report.table(figures)
    assert "cold switch" in text and "0.90 [" in text and "600.0" in text
    png = router_report.write_plot(passes, figures, tmp_path / "r.png", "title")
    assert png.read_bytes()[:4] == b"\x89PNG"
    empty = router_report.summary([])
    assert empty["tokens_per_s"]["ratio_ours_over_llama_server"] is None
    assert "-" in router_report.table(empty)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(not DEFAULT_LLAMA_SERVER.is_file(), reason="llama-server not built")
def test_a_tiny_run_of_both_routers(tmp_path: Path) -> None:
    """One pass at tiny sizes: every figure is there, unloading gives memory back on both,
    the cold switch found B unloaded and left it loaded."""
    out = tmp_path / "out"
    argv = ["--passes", "1", "--concurrency", "1", "-t", "1", "--prompt-tokens", "8"]
    argv += ["--max-tokens", "4", "--switch-max-tokens", "2", "--out", str(out)]
    argv += ["--cache", str(tmp_path / "cache"), "--logs", str(tmp_path / "logs")]
    assert router_compare.main(argv) == 0
    data = json.loads((out / router_compare.JSON_NAME).read_text())
    assert (out / router_compare.PNG_NAME).read_bytes()[:4] == b"\x89PNG"
    assert data["failures"] == [] and data["models"]["B"]["id"].endswith("Q8_0")
    assert data["models"]["B"]["bytes"] > data["models"]["A"]["bytes"]
    (row,) = data["passes"]
    for server in (OURS, BASELINE):
        fig = row[server]
        assert fig["wave"]["errors"] == [] and fig["wave"]["short"] == 0
        assert fig["wave"]["tokens"] == 2 * 4  # one stream of 4 tokens to each model
        assert fig["rss_one_bytes"] < fig["rss_both_bytes"]
        assert fig["processes_one"] < fig["processes_both"]
        assert fig["state_before_switch"] == "unloaded"
        assert fig["state_after_switch"] == "loaded"
        assert fig["cold_switch_ttft_ms"] > 0 and fig["tokens_per_s"] > 0
    for figure in data["figures"].values():
        assert len(figure["ratio_ours_over_llama_server"]["ratios"]) == 1
    assert "--models-dir" in data["servers"][BASELINE]
    assert not any(str(tmp_path) in arg for arg in data["servers"][OURS])
