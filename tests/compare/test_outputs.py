"""Base-logits file, built-in text, gate, JSON, HTML report and plot (no llama.cpp needed)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from backend.compare.base_logits import BaseLogitsReader, BaseLogitsWriter, scored_per_chunk
from backend.compare.errors import BaseLogitsError, EvaluationTextError
from backend.compare.eval_text import load_text, stdlib_docstring_text
from backend.compare.gate import gate_failures
from backend.compare.metrics import encode_log_probs, row_width
from backend.compare.plot import plot_png
from backend.compare.report_html import render_html
from backend.compare.results import (
    Answer,
    CandidateResult,
    CompareResult,
    ReferenceResult,
    write_json,
)


def test_base_file_has_llama_cpp_layout_and_round_trips(tmp_path: Path) -> None:
    n_ctx, n_vocab, n_chunk = 8, 5, 2
    tokens = np.arange(n_ctx * n_chunk, dtype=np.int32) % n_vocab
    rng = np.random.default_rng(1)
    path = tmp_path / "ref.kld"
    writer = BaseLogitsWriter(path, n_ctx, n_vocab, tokens)
    blocks = []
    for _ in range(n_chunk):
        block = encode_log_probs(
            rng.standard_normal((scored_per_chunk(n_ctx), n_vocab)).astype(np.float32),
            np.zeros(scored_per_chunk(n_ctx), dtype=np.int32),
        )
        writer.write_rows(block.rows)
        blocks.append(block.rows)
    assert not path.exists()  # still a .part file
    writer.commit()

    raw = path.read_bytes()
    assert raw[:8] == b"_logits_"
    assert np.frombuffer(raw, "<u4", 1, 8)[0] == n_ctx
    assert list(np.frombuffer(raw, "<i4", 2, 12)) == [n_vocab, n_chunk]
    assert len(raw) == 20 + 4 * tokens.size + 2 * row_width(n_vocab) * 3 * n_chunk

    reader = BaseLogitsReader(path)
    reader.check_matches(n_ctx, n_vocab, tokens)
    assert np.array_equal(reader.chunk_rows(1), blocks[1])
    with pytest.raises(BaseLogitsError, match="different text"):
        reader.check_matches(n_ctx, n_vocab, tokens[::-1].copy())
    with pytest.raises(BaseLogitsError, match="n_ctx"):
        reader.check_matches(16, n_vocab, tokens)


def test_incomplete_base_file_is_not_committed(tmp_path: Path) -> None:
    path = tmp_path / "ref.kld"
    writer = BaseLogitsWriter(path, 8, 5, np.zeros(16, dtype=np.int32))
    with pytest.raises(BaseLogitsError, match="expected 6"):
        writer.commit()
    assert not path.exists()
    assert not list(tmp_path.iterdir())


def test_truncated_base_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.kld"
    path.write_bytes(b"_logits_" + b"\0" * 40)
    with pytest.raises(BaseLogitsError):
        BaseLogitsReader(path)


def test_builtin_text_is_deterministic_prose_from_installed_python() -> None:
    first = stdlib_docstring_text(20_000)
    again = stdlib_docstring_text(20_000)
    assert first.text == again.text
    assert len(first.text) == 20_000
    assert first.source.startswith("python-stdlib-docstrings")
    assert len(first.text.split()) > 2000


def test_user_text_file(tmp_path: Path) -> None:
    f = tmp_path / "t.txt"
    f.write_text("hello world\n", encoding="utf-8")
    assert load_text(f).text == "hello world\n"
    (tmp_path / "empty.txt").write_text("  \n", encoding="utf-8")
    with pytest.raises(EvaluationTextError):
        load_text(tmp_path / "empty.txt")


def _result() -> CompareResult:
    common = {"n_params": 100, "load_s": 0.1, "prompt_tok_s": 500.0, "gen_tok_s": 50.0}
    ref = ReferenceResult(
        path="/m/ref.gguf", name="ref", size_bytes=200, bpw=16.0, ppl=10.0, **common
    )
    cands = [
        CandidateResult(
            path=f"/m/{n}.gguf",
            name=n,
            size_bytes=s,
            bpw=8 * s / 100,
            ppl=p,
            ppl_ratio=p / 10,
            kld_mean=k,
            kld_mean_unc=k / 10,
            kld_p99=k * 5,
            kld_p90=k * 2,
            kld_median=k / 2,
            rms_dp_pct=k * 30,
            same_top_pct=100 - k * 100,
            **common,
        )
        for n, s, p, k in (("q8", 106, 10.01, 0.001), ("q4", 60, 10.5, 0.05), ("q2", 40, 13.0, 0.3))
    ]
    answers = [Answer("What is 2+2? <b>", "4", ["4", "4", "five & more"])]
    return CompareResult(ref, cands, answers, {"n_ctx": 128})


def test_gate_names_only_failing_candidates() -> None:
    result = _result()
    assert gate_failures(result) == []
    fails = gate_failures(result, max_kld=0.1)
    assert len(fails) == 1 and fails[0].startswith("q2:") and "KLD" in fails[0]
    fails = gate_failures(result, max_ppl_ratio=1.02)
    assert [f.split(":")[0] for f in fails] == ["q4", "q2"]
    nan_cand = result.candidates[0]
    nan_cand.kld_mean = math.nan
    assert gate_failures(result, max_kld=1.0)[0].startswith("q8:")  # NaN never passes


def test_json_schema_and_round_trip(tmp_path: Path) -> None:
    out = write_json(_result(), tmp_path / "r.json")
    data = json.loads(out.read_text())
    assert {"path", "ppl", "size_bytes"} <= data["reference"].keys()
    need = {
        "path",
        "ppl",
        "ppl_ratio",
        "kld_mean",
        "kld_p99",
        "same_top_pct",
        "rms_dp_pct",
        "size_bytes",
        "bpw",
        "gen_tok_s",
    }
    assert all(need <= c.keys() for c in data["candidates"])
    assert 0 <= data["candidates"][2]["same_top_pct"] <= 100
    assert CompareResult.from_json(data).to_json() == data


def test_plot_and_self_contained_report() -> None:
    result = _result()
    png = plot_png(result)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    html = render_html(result, png, {"q2"})
    assert "data:image/png;base64," in html
    assert not re.search(r"""(src|href)=["']https?:""", html)  # nothing fetched from outside
    assert "<script" not in html
    assert "What is 2+2? &lt;b&gt;" in html and "five &amp; more" in html
    assert html.count('class="fail"') == 1


def test_unmeasured_numbers_are_null_in_strict_json(tmp_path: Path) -> None:
    result = _result()
    result.candidates[1].gen_tok_s = math.nan  # e.g. run with --no-speed
    data = json.loads(write_json(result, tmp_path / "r.json").read_text())
    assert data["candidates"][1]["gen_tok_s"] is None
    back = CompareResult.from_json(data)
    assert math.isnan(back.candidates[1].gen_tok_s)
    assert back.to_json() == data


def test_cli_summary_table_handles_unmeasured_numbers() -> None:
    from backend.entrypoints.compare_cmd import _table

    result = _result()
    result.candidates[0].gen_tok_s = math.nan
    lines = _table(result.to_json()).splitlines()
    assert lines[0].startswith("reference ref: PPL 10.0000")
    assert len(lines) == 2 + 3
    assert lines[2].startswith("q8") and lines[2].rstrip().endswith("-")
    assert lines[4].startswith("q2") and "0.30000" in lines[4]
