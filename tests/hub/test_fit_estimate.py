"""The fit estimate against what llama.cpp really allocates, and the verdict logic.

Accuracy stated and checked here, on CPU (llama-cpp-python 0.3.36):
- KV cache: exact (to the 0.01 MiB llama.cpp prints), for f16/q8_0/q4_0 caches, with and
  without flash attention, and for sliding-window layers (gemma2, swa_full on and off);
- weights: exact (the mapped model buffer);
- total (weights + KV + compute + output buffers): within 10%; measured within ~2% for
  SmolLM2 and gemma2, within 9% for the worst case (a tiny llama with q8_0 cache at 2048);
- compute buffer alone: within 25% (measured within ~10%, one case at -21%).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.fit.errors import FitError
from backend.fit.fit_estimate import RAM_RESERVE_BYTES, estimate_fit
from backend.fit.fit_settings import FitSettings
from backend.fit.memory_probe import AvailableMemory, probe_memory
from backend.gguf_file.gguf_header import read_gguf_header
from backend.settings.engine_settings import EngineSettings
from backend.system.system_stats import GpuStats
from tests.hub.gguf_writer import tiny_gemma2, tiny_llama

llama_cpp = pytest.importorskip("llama_cpp")

MiB = 1 << 20


def knobs(**values: object) -> FitSettings:
    """Serving knobs without the session cache (``--cache-ram 0``): these tests compare the
    estimate with what llama.cpp allocates, and the cache is the server's, not llama.cpp's
    (test_the_session_cache_budget_is_counted_in_ram counts it)."""
    return FitSettings.model_validate({"cache_ram": 0, **values})


GGML_TYPES = {"f16": 1, "q8_0": 8, "q4_0": 2}
FLASH = {"auto": -1, "off": 0, "on": 1}


@dataclass
class Reported:
    model_mib: float
    kv_mib: float
    k_mib: float
    v_mib: float
    compute_mib: float
    output_mib: float

    @property
    def total_mib(self) -> float:
        return self.model_mib + self.kv_mib + self.compute_mib + self.output_mib


class LlamaCppProbe:
    """Loads a model with llama.cpp and reads the buffer sizes it logs."""

    def __init__(self, path: Path) -> None:
        self.lines: list[str] = []

        @llama_cpp.llama_log_callback  # type: ignore[misc]
        def capture(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            self.lines.append(text.decode(errors="replace"))

        self._callback = capture  # keep a reference while llama.cpp holds it
        llama_cpp.llama_log_set(capture, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        assert self.model, "".join(self.lines)[-2000:]
        text = "".join(self.lines)
        self.model_mib = sum(
            float(m) for m in re.findall(r"model buffer size = +([\d.]+) MiB", text)
        )

    def measure(self, s: FitSettings) -> Reported:
        self.lines.clear()
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = s.ctx_size, s.batch_size, s.ubatch_size
        cp.n_seq_max = s.n_seq_max
        cp.type_k, cp.type_v = GGML_TYPES[s.cache_type_k], GGML_TYPES[s.cache_type_v]
        cp.flash_attn_type = FLASH[s.flash_attn]
        cp.kv_unified, cp.swa_full = s.kv_unified, s.swa_full
        ctx = llama_cpp.llama_init_from_model(self.model, cp)
        assert ctx, "".join(self.lines)[-2000:]
        llama_cpp.llama_free(ctx)
        text = "".join(self.lines)
        kv = re.findall(
            r"llama_kv_cache: size = +([\d.]+) MiB.*K \(\w+\): +([\d.]+) MiB, V \(\w+\): +([\d.]+)",
            text,
        )
        assert kv, text[-2000:]
        return Reported(
            model_mib=self.model_mib,
            kv_mib=sum(float(k[0]) for k in kv),
            k_mib=sum(float(k[1]) for k in kv),
            v_mib=sum(float(k[2]) for k in kv),
            compute_mib=sum(
                float(m) for m in re.findall(r"compute buffer size = +([\d.]+) MiB", text)
            ),
            output_mib=sum(
                float(m) for m in re.findall(r"output buffer size = +([\d.]+) MiB", text)
            ),
        )

    def close(self) -> None:
        llama_cpp.llama_model_free(self.model)
        from llama_cpp import _logger

        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


@pytest.fixture(scope="module")
def smollm2_probe(smollm2_path: Path) -> Iterator[LlamaCppProbe]:
    probe = LlamaCppProbe(smollm2_path)
    yield probe
    probe.close()


@pytest.fixture(scope="module")
def gemma2_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gemma2(tmp_path_factory.mktemp("gemma2") / "tiny-gemma2-F16.gguf")


@pytest.fixture(scope="module")
def gemma2_probe(gemma2_path: Path) -> Iterator[LlamaCppProbe]:
    probe = LlamaCppProbe(gemma2_path)
    yield probe
    probe.close()


def _check(estimate_path: Path, probe: LlamaCppProbe, settings: FitSettings) -> None:
    est = estimate_fit(read_gguf_header(estimate_path), settings)
    got = probe.measure(settings)
    # KV: exact, to the two decimals llama.cpp prints
    assert est.kv_k_bytes / MiB == pytest.approx(got.k_mib, abs=0.006)
    assert est.kv_v_bytes / MiB == pytest.approx(got.v_mib, abs=0.006)
    assert est.kv_bytes / MiB == pytest.approx(got.kv_mib, abs=0.011)
    assert est.weights_bytes / MiB == pytest.approx(got.model_mib, abs=0.006)
    # total: within 10% (the compute buffer is the estimated part)
    assert est.total_bytes / MiB == pytest.approx(got.total_mib, rel=0.10)
    assert est.compute_bytes / MiB == pytest.approx(got.compute_mib + got.output_mib, rel=0.25)


SMOLLM2_SETTINGS = [
    knobs(ctx_size=512),
    knobs(ctx_size=4096, parallel=1, prefix_cache_entries=0),
    knobs(ctx_size=8192, flash_attn="off"),
    knobs(ctx_size=16384, flash_attn="off", parallel=8, kv_unified=True),
    knobs(ctx_size=3000, cache_type_k="q8_0", cache_type_v="q8_0"),
    knobs(ctx_size=4096, cache_type_k="q4_0", cache_type_v="q4_0", flash_attn="on"),
    knobs(ctx_size=4096, cache_type_k="q8_0", cache_type_v="f16", ubatch_size=128, batch_size=256),
    knobs(ctx_size=32768, ubatch_size=256, batch_size=2048),
    knobs(ctx_size=4096, parallel=4, kv_unified=True),  # one KV cache for all
]


@pytest.mark.parametrize(
    "settings",
    SMOLLM2_SETTINGS,
    ids=lambda s: (
        f"c{s.ctx_size}-{s.cache_type_k}-{s.cache_type_v}-fa{s.flash_attn}-ub{s.ubatch_size}"
        f"-perslot{not s.kv_unified}"
    ),
)
def test_smollm2_estimate_matches_llama_cpp(
    smollm2_path: Path, smollm2_probe: LlamaCppProbe, settings: FitSettings
) -> None:
    _check(smollm2_path, smollm2_probe, settings)


GEMMA2_SETTINGS = [
    knobs(ctx_size=4096, swa_full=False),
    knobs(ctx_size=4096, swa_full=True),
    knobs(ctx_size=16384, swa_full=False, flash_attn="off"),
    knobs(ctx_size=8192, swa_full=False, parallel=1, prefix_cache_entries=0),
    knobs(ctx_size=8192, swa_full=False, ubatch_size=128, cache_type_k="q8_0", cache_type_v="q8_0"),
]


@pytest.mark.parametrize(
    "settings",
    GEMMA2_SETTINGS,
    ids=lambda s: (
        f"c{s.ctx_size}-swafull{s.swa_full}"
        f"-np{s.parallel}-fa{s.flash_attn}-ub{s.ubatch_size}-{s.cache_type_k}"
    ),
)
def test_sliding_window_model_matches_llama_cpp(
    gemma2_path: Path, gemma2_probe: LlamaCppProbe, settings: FitSettings
) -> None:
    _check(gemma2_path, gemma2_probe, settings)


@pytest.fixture(scope="module")
def wide_llama_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 16 heads x 64 = 1024 attention width on a 256-wide model, GQA 4:1, untied output
    return tiny_llama(tmp_path_factory.mktemp("llama") / "tiny-llama-F16.gguf")


@pytest.fixture(scope="module")
def wide_llama_probe(wide_llama_path: Path) -> Iterator[LlamaCppProbe]:
    probe = LlamaCppProbe(wide_llama_path)
    yield probe
    probe.close()


WIDE_LLAMA_SETTINGS = [
    knobs(ctx_size=4096),
    knobs(ctx_size=16384, flash_attn="off"),
    knobs(ctx_size=1024, flash_attn="off"),
    knobs(ctx_size=2048, cache_type_k="q8_0", cache_type_v="q8_0"),
    knobs(ctx_size=8192, cache_type_k="q4_0", cache_type_v="q4_0", parallel=1),
]


@pytest.mark.parametrize(
    "settings",
    WIDE_LLAMA_SETTINGS,
    ids=lambda s: f"c{s.ctx_size}-fa{s.flash_attn}-{s.cache_type_k}-np{s.parallel}",
)
def test_wide_attention_model_matches_llama_cpp(
    wide_llama_path: Path, wide_llama_probe: LlamaCppProbe, settings: FitSettings
) -> None:
    _check(wide_llama_path, wide_llama_probe, settings)


def test_serve_settings_are_estimated_as_serve_runs_them(smollm2_path: Path) -> None:
    """serve's settings go to the estimate as they are: same numbers as the FitSettings."""
    header = read_gguf_header(smollm2_path)
    knobs = {"ctx_size": 2048, "parallel": 2, "cache_type_k": "q8_0", "gpu_layers": 0}
    serve = EngineSettings.model_validate({**knobs, "model_alias": "x", "max_queue": 3})
    assert estimate_fit(header, serve) == estimate_fit(header, FitSettings.model_validate(knobs))
    # a KV stream per slot (the default): parallel sequences only, the idle slots being the
    # prefix cache; unified: the prefix-cache entries are sequences of their own
    assert FitSettings.of(serve).n_seq_max == 2 and not FitSettings.of(serve).kv_unified
    assert estimate_fit(header, serve).kv_cells == 2048
    unified = FitSettings.of(serve.model_copy(update={"kv_unified": True}))
    assert unified.kv_unified and unified.n_seq_max == 2 + serve.prefix_cache_entries


def test_quantised_v_without_flash_attention_is_refused(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    with pytest.raises(FitError, match="flash attention"):
        estimate_fit(header, knobs(cache_type_v="q8_0", flash_attn="off"))
    assert estimate_fit(header, knobs(cache_type_v="q8_0", flash_attn="auto")).kv_v_bytes


def test_sliding_window_layers_are_smaller(gemma2_path: Path) -> None:
    header = read_gguf_header(gemma2_path)
    small = estimate_fit(header, knobs(ctx_size=32768, swa_full=False))
    full = estimate_fit(header, knobs(ctx_size=32768, swa_full=True))
    assert small.swa_cells < small.kv_cells == full.swa_cells == 32768
    assert small.kv_bytes < full.kv_bytes


# --- verdicts (pure: synthetic free memory) ---------------------------------------------------
def _gpu(free_mib: int) -> AvailableMemory:
    return AvailableMemory(
        ram_free_bytes=64 << 30,
        ram_total_bytes=64 << 30,
        gpus=[
            GpuStats(
                index=0,
                name="Test GPU",
                vram_used_bytes=(80 << 30) - free_mib * MiB,
                vram_total_bytes=80 << 30,
            )
        ],
    )


def test_verdict_fits_on_gpu_and_splits_layers(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    embeddings = header.tensor("token_embd.weight")
    assert embeddings is not None and header.tensor("output.weight") is None  # tied output
    est = estimate_fit(header, knobs(ctx_size=4096), _gpu(80_000))
    assert est.verdict == "fits" and est.n_gpu_layers == est.n_layer + 1
    # token_embd stays on the CPU (input layer) and is copied to the GPU for the output layer
    assert est.weights_cpu_bytes == embeddings.n_bytes
    assert est.weights_bytes == header.tensor_bytes + embeddings.n_bytes
    assert est.kv_gpu_bytes == est.kv_bytes and est.gpus[0].needed_bytes == est.gpu_bytes

    # -ngl 16 = the output layer and the last 15 repeating layers (llama.cpp's order)
    part = estimate_fit(header, knobs(ctx_size=4096, gpu_layers=16), _gpu(80_000))
    assert part.n_gpu_layers == 16
    assert sum(1 for b in part.weights_gpu_per_layer if b) == 15
    assert part.weights_gpu_per_layer[:15] == [0] * 15
    assert part.kv_gpu_bytes * 2 == part.kv_bytes
    assert part.weights_gpu_bytes == sum(part.weights_gpu_per_layer) + embeddings.n_bytes + (
        header.tensor("output_norm.weight").n_bytes  # type: ignore[union-attr]
    )


def test_verdict_partial_offload_suggests_layers(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    settings = knobs(ctx_size=32768)
    full = estimate_fit(header, settings)
    vram_mib = (full.total_bytes // 2) // MiB + 512  # about half the model, plus the reserve
    est = estimate_fit(header, settings, _gpu(vram_mib))
    assert est.verdict == "partial_offload"
    ngl = est.suggested_gpu_layers
    assert ngl is not None and 0 < ngl < est.n_layer
    fits = estimate_fit(header, settings.model_copy(update={"gpu_layers": ngl}), _gpu(vram_mib))
    too_many = estimate_fit(
        header, settings.model_copy(update={"gpu_layers": ngl + 1}), _gpu(vram_mib)
    )
    assert fits.verdict == "fits" and too_many.verdict != "fits"


def test_verdict_wont_fit_suggests_context_and_cache_type(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    settings = knobs(ctx_size=65536)
    need = estimate_fit(header, settings).total_bytes
    ram = AvailableMemory(ram_free_bytes=need * 6 // 10 + (256 << 20), ram_total_bytes=need)
    est = estimate_fit(header, settings, ram)
    assert est.verdict == "wont_fit"
    assert est.suggested_n_ctx is not None and est.suggested_n_ctx % 256 == 0
    assert (
        estimate_fit(
            header, settings.model_copy(update={"ctx_size": est.suggested_n_ctx}), ram
        ).verdict
        == "fits"
    )
    bigger = settings.model_copy(update={"ctx_size": est.suggested_n_ctx + 256})
    assert estimate_fit(header, bigger, ram).verdict == "wont_fit"
    assert est.suggested_cache_type in ("q8_0", "q4_0")
    q = est.suggested_cache_type
    with_q = settings.model_copy(update={"cache_type_k": q, "cache_type_v": q})
    assert estimate_fit(header, with_q, ram).verdict == "fits"
    assert f"-c {est.suggested_n_ctx}" in est.message and f"-ctk {q}" in est.message


def test_no_gpu_probe_never_fails() -> None:
    memory = probe_memory()
    assert memory.ram_free_bytes > 0
    if not memory.gpus:
        assert memory.gpu_note and memory.gpu_note.startswith("no GPU")


def test_layers_split_across_gpus_by_free_memory(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    memory = AvailableMemory(
        ram_free_bytes=64 << 30,
        ram_total_bytes=64 << 30,
        gpus=[
            GpuStats(
                index=0, name="A", vram_used_bytes=(4 << 30) - 3000 * MiB, vram_total_bytes=4 << 30
            ),
            GpuStats(
                index=1, name="B", vram_used_bytes=(4 << 30) - 1000 * MiB, vram_total_bytes=4 << 30
            ),
        ],
    )
    est = estimate_fit(header, knobs(ctx_size=8192), memory)
    assert est.verdict == "fits" and est.vram_free_bytes == 4000 * MiB
    a, b = est.gpus
    assert a.needed_bytes == pytest.approx(3 * b.needed_bytes, rel=1e-6)
    assert a.needed_bytes + b.needed_bytes == pytest.approx(est.gpu_bytes, abs=2)


def test_context_beyond_training_is_warned(smollm2_path: Path) -> None:
    header = read_gguf_header(smollm2_path)
    assert header.context_length == 8192
    assert estimate_fit(header, knobs(ctx_size=8192)).warnings == []
    # what one request may hold counts: a stream per slot holds ctx-size/parallel
    assert estimate_fit(header, knobs(ctx_size=16384, parallel=4)).warnings == []
    [warning] = estimate_fit(header, knobs(ctx_size=16384, parallel=1)).warnings
    assert "16384" in warning and "8192" in warning
    [warning] = estimate_fit(header, knobs(ctx_size=16384, kv_unified=True)).warnings
    assert "16384" in warning and "8192" in warning


def test_the_session_cache_budget_is_counted_in_ram(smollm2_path: Path) -> None:
    """--cache-ram is RAM the server may fill with sessions' KV: the estimate counts it
    (once, with or without a draft model), and a machine that holds the model but not the
    model plus its cache is told it does not fit."""
    header = read_gguf_header(smollm2_path)
    off = estimate_fit(header, EngineSettings(ctx_size=4096, cache_ram=0))
    on = estimate_fit(header, EngineSettings(ctx_size=4096, cache_ram=512))
    assert off.session_cache_bytes == 0
    assert on.session_cache_bytes == 512 << 20
    assert on.cpu_bytes == off.cpu_bytes + (512 << 20)
    assert on.total_bytes == off.total_bytes + (512 << 20)
    with_draft = estimate_fit(header, EngineSettings(ctx_size=4096, cache_ram=512), draft=header)
    assert with_draft.session_cache_bytes == 512 << 20
    ram = AvailableMemory(
        ram_free_bytes=off.total_bytes + RAM_RESERVE_BYTES + (256 << 20), ram_total_bytes=64 << 30
    )
    assert estimate_fit(header, EngineSettings(ctx_size=4096, cache_ram=0), ram).verdict == "fits"
    assert estimate_fit(header, EngineSettings(ctx_size=4096, cache_ram=512), ram).verdict != "fits"


def test_a_draft_model_is_counted_with_its_own_offload(smollm2_path: Path) -> None:
    """-md adds the draft model's weights, KV (laid out like the served context) and compute,
    its layers offloaded as -ngld says; a budget that holds the served model alone no
    longer holds both, and the suggestions count the draft too."""
    header = read_gguf_header(smollm2_path)
    settings = EngineSettings(ctx_size=8192, gpu_layers_draft=0, cache_ram=0)
    alone = estimate_fit(header, settings, _gpu(4096))
    draft_alone = estimate_fit(header, settings.model_copy(update={"gpu_layers": 0}), _gpu(4096))
    both = estimate_fit(header, settings, _gpu(4096), draft=header)
    assert both.draft_bytes == draft_alone.total_bytes > 0
    assert both.total_bytes == alone.total_bytes + draft_alone.total_bytes
    assert both.gpu_bytes == alone.gpu_bytes  # -ngld 0: the draft stays in RAM
    assert both.cpu_bytes == alone.cpu_bytes + draft_alone.cpu_bytes
    assert "of which the draft model" in both.message

    ram = AvailableMemory(
        ram_free_bytes=alone.total_bytes + RAM_RESERVE_BYTES + draft_alone.total_bytes // 2,
        ram_total_bytes=64 << 30,
    )
    assert estimate_fit(header, settings, ram).verdict == "fits"
    crowded = estimate_fit(header, settings, ram, draft=header)
    assert crowded.verdict == "wont_fit" and crowded.suggested_n_ctx is not None
    smaller = settings.model_copy(update={"ctx_size": crowded.suggested_n_ctx})
    assert estimate_fit(header, smaller, ram, draft=header).verdict == "fits"


def test_a_projector_counts_its_weights_and_one_images_encoder_working_set(
    smollm2_path: Path, tmp_path: Path
) -> None:
    """--mmproj adds the projector's tensors and the estimated working set of encoding one
    image (activations and, without flash attention, every head's patch-by-patch scores)."""
    from backend.fit.projector_need import projector_needs
    from tests.hub.gguf_writer import U64, write_gguf

    meta = {
        "general.architecture": "clip",
        "clip.vision.image_size": U64(224),
        "clip.vision.patch_size": U64(14),
        "clip.vision.embedding_length": U64(64),
        "clip.vision.feed_forward_length": U64(128),
        "clip.vision.attention.head_count": U64(2),
    }
    path = write_gguf(
        tmp_path / "mmproj.gguf", meta, {"v.patch_embd.weight": ([14, 14, 3, 64], "f16")}
    )
    projector = read_gguf_header(path)
    weights, compute = projector_needs(projector)
    patches = (224 // 14) ** 2
    assert weights == 14 * 14 * 3 * 64 * 2
    assert compute == 4 * patches * (4 * 64 + 128 + 2 * patches)
    header = read_gguf_header(smollm2_path)
    settings = EngineSettings(ctx_size=4096, cache_ram=0)
    text = estimate_fit(header, settings)
    vision = estimate_fit(header, settings, projector=projector)
    assert vision.projector_bytes == weights + compute
    assert vision.total_bytes == text.total_bytes + weights + compute
    assert vision.cpu_bytes == text.cpu_bytes + weights + compute  # no GPU: all in RAM
