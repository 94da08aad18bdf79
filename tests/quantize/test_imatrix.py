"""Importance matrix: file round trip, collection on real weights, lower KL divergence."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from quantize.errors import CalibrationError, ImatrixError, QuantizationFailedError
from quantize.imatrix import compute_imatrix
from quantize.imatrix_file import Imatrix, load_imatrix, save_imatrix
from quantize.quantizer import quantize_gguf


def test_imatrix_file_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    im = Imatrix(n_chunks=3, dataset="prompts.txt")
    im.add("blk.0.attn_q.weight", rng.random(64) * 10, 100)
    im.add("blk.0.attn_q.weight", rng.random(64), 28)
    im.add("blk.0.ffn_down.weight", rng.random(128), 128)
    path = save_imatrix(im, tmp_path / "m.imatrix")
    back = load_imatrix(path)
    assert back.n_chunks == 3 and back.dataset == "prompts.txt"
    assert set(back.entries) == set(im.entries)
    for name, entry in im.entries.items():
        assert back.entries[name].count == entry.count
        np.testing.assert_allclose(back.entries[name].sums, entry.sums, rtol=1e-6)
    # the legacy layout: n_entries first, then the first (sorted) name
    raw = path.read_bytes()
    assert struct.unpack_from("<i", raw, 0)[0] == 2
    assert raw[8 : 8 + len(b"blk.0.attn_q.weight")] == b"blk.0.attn_q.weight"


def test_imatrix_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ImatrixError, match="not found"):
        load_imatrix(tmp_path / "none.imatrix")
    junk = tmp_path / "junk.imatrix"
    junk.write_bytes(b"\xff\xff\xff\x7f" + b"abc")
    with pytest.raises(ImatrixError, match="not a valid imatrix"):
        load_imatrix(junk)


def test_calibration_too_short(tiny_f16: Path) -> None:
    with pytest.raises(CalibrationError, match="too short"):
        compute_imatrix(tiny_f16, "Hello.")
    with pytest.raises(CalibrationError, match="empty"):
        compute_imatrix(tiny_f16, "   \n")


def test_imatrix_collects_matmul_inputs(tiny_f16: Path, business_prompts: list[str]) -> None:
    run = compute_imatrix(tiny_f16, "\n".join(business_prompts[:20]), n_ctx=64, threads=2)
    im = run.imatrix
    # 2 layers x (q, k, v, o, gate, up, down)
    assert len(im.entries) == 14
    q = im.entries["blk.0.attn_q.weight"]
    assert q.sums.shape == (256,)  # input columns = hidden size
    assert im.entries["blk.1.ffn_down.weight"].sums.shape == (512,)
    assert q.count == run.n_tokens  # every token's activation row was seen
    assert np.all(q.sums > 0) and np.all(np.isfinite(q.sums))
    # q, k and v read the same normed input
    np.testing.assert_allclose(q.sums, im.entries["blk.0.attn_k.weight"].sums, rtol=1e-5)


@pytest.mark.slow
def test_imatrix_lowers_kld_of_q2_k(
    smollm2_f16: Path, business_prompts: list[str], tmp_path: Path
) -> None:
    from tests.quantize.kld import mean_kld

    calibration = "\n".join(business_prompts[:48])
    held_out = "\n".join(business_prompts[55:])
    run = compute_imatrix(smollm2_f16, calibration, n_ctx=256, threads=2, max_chunks=4)
    assert len(run.imatrix.entries) == 30 * 7
    path = save_imatrix(run.imatrix, tmp_path / "smollm2.imatrix")
    plain = quantize_gguf(smollm2_f16, "Q2_K", tmp_path / "plain", threads=2)
    with_im = quantize_gguf(smollm2_f16, "Q2_K", tmp_path / "imatrix", imatrix=path, threads=2)
    assert with_im.imatrix == path.resolve()
    kld_plain, kld_im = mean_kld(smollm2_f16, [plain.path, with_im.path], held_out, max_chunks=2)
    print(f"Q2_K KLD vs F16: without imatrix {kld_plain:.4f}, with imatrix {kld_im:.4f}")
    assert kld_im < 0.85 * kld_plain


def test_imatrix_of_another_model_is_rejected(tiny_f16: Path, tmp_path: Path) -> None:
    im = Imatrix()
    im.add("blk.0.attn_q.weight", np.ones(64), 10)  # tiny-llama's rows are 256 wide
    path = save_imatrix(im, tmp_path / "other.imatrix")
    out = tmp_path / "out"
    with pytest.raises(QuantizationFailedError, match="imatrix size 64 is different"):
        quantize_gguf(tiny_f16, "Q4_K_M", out, imatrix=path)
    assert list(out.iterdir()) == []
