"""Will it fit? Memory needed to serve a GGUF with given settings, from its header alone.

``estimate_fit(header, settings, memory)`` is a pure function: weights (split per
layer between GPU and CPU the way llama.cpp assigns ``-ngl`` layers), KV cache
(exact), compute buffer (estimate), total, and a verdict against free VRAM per
GPU and free RAM. The parts live beside it, one role each:

- ``kv_cache_size``: the KV cache, exactly as ``llama_kv_cache`` allocates it;
- ``compute_buffer``: the compute graph's working memory (an estimate fitted to llama.cpp);
- ``memory_needs``: weights, KV and compute split between GPU and CPU, with a draft model,
  a projector and the session cache;
- ``device_budget``: what free RAM and each offload device can take;
- ``fit_verdict``: fits, partial offload or won't fit, and what would make it fit.

This module puts them together into one :class:`FitEstimate`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from backend.fit.device_budget import RAM_RESERVE_BYTES, DeviceBudget, GpuShare, device_fractions
from backend.fit.fit_settings import FitSettings
from backend.fit.fit_verdict import FitTrial, Verdict, judge
from backend.fit.kv_cache_size import flash_attention_enabled
from backend.fit.memory_needs import Companions, DraftModel, MemoryNeeds, memory_needs
from backend.fit.memory_probe import AvailableMemory
from backend.fit.model_shape import ModelShape
from backend.fit.projector_need import projector_needs
from backend.gguf_file.gguf_header import GGUFHeader
from backend.settings.engine_settings import CacheType, ServingKnobs

# RAM_RESERVE_BYTES and Verdict are imported from here by callers and tests.
__all__ = ["RAM_RESERVE_BYTES", "FitEstimate", "GpuShare", "Verdict", "estimate_fit"]


@dataclass
class FitEstimate:
    """The memory a model needs with some settings, and whether that fits."""

    model: str
    architecture: str
    n_layer: int
    n_ctx: int
    kv_cells: int
    swa_cells: int
    cache_type_k: CacheType
    cache_type_v: CacheType
    flash_attn: bool
    n_gpu_layers: int
    weights_bytes: int
    weights_gpu_bytes: int
    weights_cpu_bytes: int
    weights_gpu_per_layer: list[int]
    kv_bytes: int
    kv_k_bytes: int
    kv_v_bytes: int
    kv_gpu_bytes: int
    kv_cpu_bytes: int
    compute_bytes: int
    compute_gpu_bytes: int
    compute_cpu_bytes: int
    total_bytes: int
    gpu_bytes: int
    cpu_bytes: int
    verdict: Verdict
    message: str
    suggested_gpu_layers: int | None = None
    suggested_n_ctx: int | None = None
    suggested_cache_type: CacheType | None = None
    ram_free_bytes: int | None = None
    vram_free_bytes: int | None = None
    gpus: list[GpuShare] = field(default_factory=list)
    gpu_note: str | None = None
    warnings: list[str] = field(default_factory=list)
    draft_bytes: int = 0  # of total_bytes: the draft model's weights, KV and compute
    projector_bytes: int = 0  # of total_bytes: the projector's weights and image compute
    session_cache_bytes: int = 0  # of cpu_bytes: the session cache's RAM budget (--cache-ram)
    # where the layers go ("layers 0-14 on RPC0 (host:port)", ...), when any are offloaded
    placement: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def estimate_fit(
    header: GGUFHeader,
    knobs: ServingKnobs | None = None,
    memory: AvailableMemory | None = None,
    draft: GGUFHeader | None = None,
    projector: GGUFHeader | None = None,
) -> FitEstimate:
    """Memory needs of ``header``'s model with ``knobs``, judged against ``memory``.

    ``knobs`` may be any serving knobs (serve's settings, the GUI's); ``None`` is serve's
    defaults. ``memory=None`` judges against unlimited RAM and no GPU (a pure size estimate).
    ``draft``: the header of the draft model (``-md``), counted with the served one, its
    layers offloaded as ``knobs.gpu_layers_draft`` says (-1: as many as the served model's).
    ``projector``: the header of the model's ``--mmproj``, counted where the layers go.
    """
    settings = FitSettings.of(knobs) if knobs is not None else FitSettings()
    settings.check()
    shape = ModelShape.from_header(header)
    if memory is None:
        memory = AvailableMemory(ram_free_bytes=1 << 62, ram_total_bytes=1 << 62, gpu_note="no GPU")
    has_gpu = bool(memory.gpus) and settings.gpu_layers != 0
    the_draft = None
    if draft is not None:
        ngld = getattr(knobs, "gpu_layers_draft", -1)
        the_draft = DraftModel(
            ModelShape.from_header(draft), settings.gpu_layers if ngld < 0 else ngld
        )
    companions = Companions(the_draft, *(projector_needs(projector) if projector else (0, 0)))
    needs = memory_needs(shape, settings, has_gpu, companions)
    budget = DeviceBudget(memory, device_fractions(memory, settings.tensor_split))
    judgement = judge(FitTrial(shape, settings, has_gpu, companions, budget), needs)
    gpu_bytes = needs.gpu if has_gpu else 0
    weights_gpu_per_layer = [
        b if needs.gpu_layers[il] else 0 for il, b in enumerate(shape.layer_bytes)
    ]
    return FitEstimate(
        model=str(header.path),
        architecture=shape.architecture,
        n_layer=shape.n_layer,
        n_ctx=settings.ctx_size,
        kv_cells=needs.layout.cells,
        swa_cells=needs.layout.swa_cells,
        cache_type_k=settings.cache_type_k,
        cache_type_v=settings.cache_type_v,
        flash_attn=flash_attention_enabled(settings),
        n_gpu_layers=sum(needs.gpu_layers),
        weights_bytes=needs.weights_gpu + needs.weights_cpu,
        weights_gpu_bytes=needs.weights_gpu,
        weights_cpu_bytes=needs.weights_cpu,
        weights_gpu_per_layer=weights_gpu_per_layer,
        kv_bytes=needs.layout.total,
        kv_k_bytes=needs.layout.k_bytes,
        kv_v_bytes=needs.layout.v_bytes,
        kv_gpu_bytes=needs.kv_gpu,
        kv_cpu_bytes=needs.kv_cpu,
        compute_bytes=needs.compute_gpu + needs.compute_cpu,
        compute_gpu_bytes=needs.compute_gpu,
        compute_cpu_bytes=needs.compute_cpu,
        total_bytes=needs.gpu + needs.cpu,
        draft_bytes=needs.draft_bytes,
        projector_bytes=needs.projector_bytes,
        session_cache_bytes=needs.session_cpu,
        gpu_bytes=gpu_bytes,
        cpu_bytes=needs.cpu,
        verdict=judgement.verdict,
        message=judgement.message,
        suggested_gpu_layers=judgement.suggested_gpu_layers,
        suggested_n_ctx=judgement.suggested_n_ctx,
        suggested_cache_type=judgement.suggested_cache_type,
        ram_free_bytes=memory.ram_free_bytes if memory.ram_free_bytes < (1 << 61) else None,
        vram_free_bytes=memory.vram_free_bytes if memory.gpus else None,
        gpus=budget.gpu_shares(gpu_bytes),
        placement=budget.placement(shape.n_layer, sum(needs.gpu_layers) if has_gpu else 0),
        gpu_note=memory.gpu_note,
        warnings=_context_warnings(header, settings, needs),
    )


def _context_warnings(header: GGUFHeader, settings: FitSettings, needs: MemoryNeeds) -> list[str]:
    """A warning when a sequence may hold more context than the model was trained on."""
    n_ctx_train = header.context_length
    per_seq = (
        needs.layout.cells if settings.kv_unified else needs.layout.cells // settings.n_seq_max
    )
    if n_ctx_train and per_seq > n_ctx_train:
        return [
            f"a sequence may use {per_seq} tokens of context, more than the {n_ctx_train} "
            "the model was trained on: quality may drop past that"
        ]
    return []
