"""The comparison on real SmolLM2-135M quants: F16 reference against Q8_0, Q4_K_M, Q2_K."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from backend.compare.base_logits import BaseLogitsWriter
from backend.compare.compare import CompareConfig, run_compare
from backend.compare.errors import CompareCancelledError, IncompatibleModelsError
from backend.compare.eval_text import stdlib_docstring_text
from backend.compare.gate import gate_failures
from backend.compare.llama_model import LoadedModel
from backend.compare.results import CompareResult
from backend.compare.scoring import make_plan, score_reference
from backend.entrypoints.main import main as cli_main
from backend.jobs.progress import Progress

pytestmark = pytest.mark.slow  # about a minute on an idle 2-core machine

CTX = 128
CHUNKS = 6


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("prompts") / "prompts.txt"
    path.write_text("# two short prompts\nWhat is the capital of France?\nName a colour.\n")
    return path


@pytest.fixture(scope="module")
def compared(
    smollm2_quants: dict[str, Path], prompts_file: Path
) -> tuple[CompareResult, list[Progress]]:
    events: list[Progress] = []
    config = CompareConfig(
        reference=smollm2_quants["F16"],
        candidates=[smollm2_quants[n] for n in ("Q8_0", "Q4_K_M", "Q2_K", "F16")],
        n_ctx=CTX,
        n_batch=4 * CTX,
        max_chunks=CHUNKS,
        prompts_path=prompts_file,
        answer_max_tokens=16,
    )
    return run_compare(config, events.append), events


def test_kld_grows_and_top_agreement_falls_as_bits_drop(
    compared: tuple[CompareResult, list[Progress]],
) -> None:
    result, _ = compared
    q8, q4, q2 = result.candidates[:3]
    assert 0 < q8.kld_mean < q4.kld_mean < q2.kld_mean
    assert q8.same_top_pct > q4.same_top_pct > q2.same_top_pct
    assert q8.kld_p99 < q2.kld_p99
    assert q8.rms_dp_pct < q2.rms_dp_pct
    assert q2.ppl_ratio > 1.0
    for c in (q8, q4, q2):
        assert c.kld_median <= c.kld_p90 <= c.kld_p99 <= c.kld_max
        assert 0.0 <= c.same_top_pct <= 100.0
        assert math.isfinite(c.ppl) and c.ppl > 1.0


def test_reference_against_itself_is_exact(compared: tuple[CompareResult, list[Progress]]) -> None:
    result, _ = compared
    self_cand = result.candidates[3]
    assert self_cand.kld_mean < 1e-5
    assert self_cand.same_top_pct == 100.0
    assert self_cand.ppl_ratio == pytest.approx(1.0, abs=1e-3)
    assert self_cand.ppl == pytest.approx(result.reference.ppl, rel=1e-4)
    assert self_cand.rms_dp_pct < 0.05
    # greedy decoding is deterministic: the same model gives the same answers
    assert [a.candidates[3] for a in result.answers] == [a.reference for a in result.answers]


def test_reference_perplexity_and_facts_are_plausible(
    compared: tuple[CompareResult, list[Progress]],
) -> None:
    result, events = compared
    ref = result.reference
    assert math.isfinite(ref.ppl) and 2.0 < ref.ppl < 200.0
    assert ref.n_params > 100_000_000
    assert 15.5 < ref.bpw < 17.5
    q8, q4, q2 = result.candidates[:3]
    assert 8.0 < q8.bpw < 9.5 and q2.bpw < q4.bpw < q8.bpw
    # bits per weight count tensor bytes, not the file's tokenizer metadata (~1.8 MB here)
    assert q8.bpw < 8.0 * q8.size_bytes / q8.n_params - 0.05
    for c in (q8, q4, q2):
        assert 0 < c.ln_ppl_ratio_unc < 0.1 and 0 < c.same_top_pct_unc < 5
    assert ref.size_bytes > q8.size_bytes > q4.size_bytes > q2.size_bytes
    for m in (ref, q8, q4, q2):
        assert m.load_s > 0 and m.prompt_tok_s > 0 and m.gen_tok_s > 0
    assert result.settings["n_chunk"] == CHUNKS and result.settings["n_seq"] == 4
    assert result.settings["scored_tokens"] == CHUNKS * (CTX - 1 - CTX // 2)
    assert len(result.answers) == 2
    assert all(a.reference and len(a.candidates) == 4 for a in result.answers)
    ref_steps = [e for e in events if e.stage == "reference" and e.total == 2]
    assert [e.done for e in ref_steps] == [1, 2]  # 6 chunks, 4 per decode


def test_gate_flags_q2_k_at_a_tight_threshold(
    compared: tuple[CompareResult, list[Progress]],
) -> None:
    result, _ = compared
    q4, q2 = result.candidates[1], result.candidates[2]
    threshold = (q4.kld_mean + q2.kld_mean) / 2
    failures = gate_failures(result, max_kld=threshold)
    assert len(failures) == 1 and failures[0].startswith(q2.name + ":")


def test_several_chunks_per_decode_match_one_chunk_per_decode(
    smollm2_quants: dict[str, Path],
    tmp_path: Path,
) -> None:
    text = stdlib_docstring_text(4_000).text
    nll = {}
    with LoadedModel(smollm2_quants["Q8_0"]) as model:
        tokens = model.tokenize(text)
        for n_seq in (1, 4):
            plan = make_plan(tokens, CTX, n_seq * CTX, 4, model.add_bos, model.bos)
            assert plan.n_seq == n_seq
            ctx = model.context(CTX * n_seq, CTX * n_seq, n_seq)
            writer = BaseLogitsWriter(tmp_path / f"b{n_seq}.kld", CTX, model.n_vocab, plan.tokens)
            nll[n_seq] = score_reference(model, ctx, plan, writer).nll
            writer.commit()
            ctx.close()
    assert np.allclose(nll[1], nll[4], atol=2e-3)


def test_cancel_stops_the_run(smollm2_quants: dict[str, Path], tmp_path: Path) -> None:
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.stage == "reference" and p.done >= 1:
            cancel.set()

    config = CompareConfig(
        reference=smollm2_quants["F16"],
        candidates=[smollm2_quants["Q2_K"]],
        n_ctx=CTX,
        n_batch=CTX,
        max_chunks=4,
        answers=False,
        speed=False,
        keep_base=tmp_path / "b.kld",
    )
    with pytest.raises(CompareCancelledError):
        run_compare(config, progress, cancel)
    assert not list(tmp_path.iterdir())  # the partial base file was removed


def test_unloadable_candidate_is_reported_by_name(
    smollm2_quants: dict[str, Path],
    tmp_path: Path,
) -> None:
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"GGUF" + b"\0" * 64)
    config = CompareConfig(
        reference=smollm2_quants["Q8_0"],
        candidates=[not_a_model],
        n_ctx=CTX,
        max_chunks=2,
        answers=False,
        speed=False,
    )
    events: list[Progress] = []
    with pytest.raises(Exception) as info:
        run_compare(config, events.append)
    assert not isinstance(info.value, IncompatibleModelsError)
    assert "broken.gguf" in str(info.value)
    # found up front (its tokenizer alone is loaded), not after the reference pass
    assert not [e for e in events if e.stage == "reference" and e.done > 0]


def test_cli_writes_outputs_and_gate_fails_naming_the_quant(
    smollm2_quants: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out_json, report, plot = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.png"
    rc = cli_main(
        [
            "compare",
            "--reference",
            str(smollm2_quants["F16"]),
            str(smollm2_quants["Q2_K"]),
            "--ctx",
            str(CTX),
            "--chunks",
            "2",
            "--no-answers",
            "--no-speed",
            "--progress-jsonl",
            "--json",
            str(out_json),
            "--report",
            str(report),
            "--plot",
            str(plot),
            "--max-kld",
            "0.0001",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 5
    assert "gate failed" in captured.err and "smollm2-Q2_K" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert lines[0]["type"] == "progress"
    result_line = next(x for x in lines if x["type"] == "result")
    assert result_line["gate_failures"][0].startswith("smollm2-Q2_K:")
    assert lines[-1]["type"] == "error"
    data = json.loads(out_json.read_text())
    assert data["candidates"][0]["kld_mean"] > 0.0001
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "data:image/png;base64," in report.read_text()


def test_a_cancel_stops_llama_decode_itself(smollm2_quants: dict[str, Path]) -> None:
    """llama.cpp polls the cancel between graph nodes, so a cancel does not wait for a
    whole decode (thousands of tokens on a big model). Set before the call, the decode
    stops at its first node; without it the same decode completes."""
    n = 256
    tokens = np.arange(100, 100 + n, dtype=np.int32)
    pos = np.arange(n, dtype=np.int32)
    seq = np.zeros(n, dtype=np.int32)
    want = np.zeros(n, dtype=bool)
    want[-1] = True
    cancel = threading.Event()
    with LoadedModel(smollm2_quants["Q2_K"], n_threads=2) as model:
        ctx = model.context(n, n, 1, cancel)
        assert ctx.decode(tokens, pos, seq, want) == 1  # not cancelled: it runs
        ctx.clear()
        cancel.set()
        with pytest.raises(CompareCancelledError):
            ctx.decode(tokens, pos, seq, want)


def _terminal_compare(reference: Path, candidate: Path) -> int:
    """``quantdesk compare`` as a person runs it in a terminal: no JSONL, two chunks."""
    args = ["compare", "--reference", str(reference), str(candidate), "--ctx", str(CTX)]
    return cli_main([*args, "--chunks", "2", "--no-answers", "--no-speed"])


def test_cli_in_a_terminal_shows_progress_full_names_and_warns_on_a_low_bit_reference(
    smollm2_quants: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    long_name = tmp_path / "SmolLM2-135M-Instruct-a-rather-long-file-name-Q4_K_M.gguf"
    long_name.symlink_to(smollm2_quants["Q4_K_M"])
    assert _terminal_compare(smollm2_quants["Q8_0"], long_name) == 0
    captured = capsys.readouterr()
    assert long_name.stem in captured.out  # the quant type is not cut off the name
    assert "MiB" in captured.out
    progress = [line for line in captured.err.split("\r") if "[" in line and "%" in line]
    assert any("reference" in line and "tok/s" in line and "ETA" in line for line in progress)
    assert any("candidate 1/1" in line and "100.0%" in line for line in progress)
    assert "warning" not in captured.err  # Q8_0 is a fine reference

    assert _terminal_compare(smollm2_quants["Q2_K"], smollm2_quants["Q8_0"]) == 0
    captured = capsys.readouterr()
    assert "warning: the reference smollm2-Q2_K.gguf is itself a Q2_K quant" in captured.err
