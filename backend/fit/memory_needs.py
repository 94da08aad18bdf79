"""Where a served model's bytes go: weights, KV cache and compute, each split between the
GPU and the CPU the way llama.cpp assigns ``-ngl`` layers, plus what loads beside it (a
draft model, a projector) and the RAM the session cache may fill."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from backend.fit.compute_buffer import compute_buffer_bytes, output_buffer_bytes
from backend.fit.fit_settings import FitSettings
from backend.fit.kv_cache_size import KvLayout, kv_cache_layout
from backend.fit.model_shape import ModelShape
from backend.settings.cache_budgets import session_ram_mib

MiB = 1 << 20


@dataclass(frozen=True)
class MemoryNeeds:
    """The bytes a model needs on the GPU and on the CPU, by kind."""

    layout: KvLayout
    gpu_layers: list[bool]
    weights_gpu: int
    weights_cpu: int
    kv_gpu: int
    kv_cpu: int
    compute_gpu: int
    compute_cpu: int

    draft_bytes: int = 0  # of the totals below: the draft model's weights, KV and compute
    projector_bytes: int = 0  # of the totals below: the projector's weights and compute
    session_cpu: int = 0  # the session cache's RAM budget (--cache-ram), at most

    @property
    def gpu(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu

    @property
    def cpu(self) -> int:
        return self.weights_cpu + self.kv_cpu + self.compute_cpu + self.session_cpu


@dataclass(frozen=True)
class DraftModel:
    """A draft model for speculative decoding: its own weights, and a context laid out like
    the served one (same -c, -np, KV types), with ``gpu_layers`` of its own (-ngld)."""

    shape: ModelShape
    gpu_layers: int


@dataclass(frozen=True)
class Companions:
    """What loads beside the served model: a draft model (``-md``), and a projector
    (``--mmproj``: its weights, and one image's encoder working set)."""

    draft: DraftModel | None = None
    projector_weights: int = 0
    projector_compute: int = 0


def memory_needs(
    shape: ModelShape,
    settings: FitSettings,
    has_gpu: bool,
    companions: Companions = Companions(),
) -> MemoryNeeds:
    """The served model's needs, plus the draft model's and the projector's when there
    are, plus the RAM the session cache may fill (``--cache-ram``: sessions' KV kept past
    their slot)."""
    needs = dataclasses.replace(
        model_needs(shape, settings, has_gpu),
        session_cpu=session_ram_mib(settings.cache_ram) * MiB,
    )
    if companions.draft is not None:
        draft_settings = settings.model_copy(update={"gpu_layers": companions.draft.gpu_layers})
        d = model_needs(companions.draft.shape, draft_settings, has_gpu)
        needs = dataclasses.replace(
            needs,
            weights_gpu=needs.weights_gpu + d.weights_gpu,
            weights_cpu=needs.weights_cpu + d.weights_cpu,
            kv_gpu=needs.kv_gpu + d.kv_gpu,
            kv_cpu=needs.kv_cpu + d.kv_cpu,
            compute_gpu=needs.compute_gpu + d.compute_gpu,
            compute_cpu=needs.compute_cpu + d.compute_cpu,
            draft_bytes=d.gpu + d.cpu,
        )
    weights, compute = companions.projector_weights, companions.projector_compute
    if weights or compute:
        # the projector goes where the layers go: to the GPU unless -ngl 0
        gpu = has_gpu and any(needs.gpu_layers)
        needs = dataclasses.replace(
            needs,
            weights_gpu=needs.weights_gpu + (weights if gpu else 0),
            weights_cpu=needs.weights_cpu + (0 if gpu else weights),
            compute_gpu=needs.compute_gpu + (compute if gpu else 0),
            compute_cpu=needs.compute_cpu + (0 if gpu else compute),
            projector_bytes=weights + compute,
        )
    return needs


def model_needs(shape: ModelShape, settings: FitSettings, has_gpu: bool) -> MemoryNeeds:
    """One model's weights, KV cache and compute buffers, split between GPU and CPU: the
    last ``-ngl`` layers (the output layer counted as one) go to the GPU."""
    layout = kv_cache_layout(shape, settings)
    n_layer = shape.n_layer
    ngl = settings.gpu_layers if settings.gpu_layers >= 0 else n_layer + 1
    ngl = min(ngl, n_layer + 1) if has_gpu else 0
    first_gpu = n_layer + 1 - ngl
    on_gpu = [il >= first_gpu for il in range(n_layer + 1)]  # index n_layer = output layer
    weights_gpu = sum(b for il, b in enumerate(shape.layer_bytes) if on_gpu[il])
    weights_total = sum(shape.layer_bytes) + shape.other_bytes
    if on_gpu[n_layer]:
        # the output layer goes to the GPU; with tied embeddings llama.cpp copies token_embd there
        weights_gpu += shape.output_bytes + shape.tied_output_bytes
        weights_total += shape.tied_output_bytes
    kv_layer = [
        k + v for k, v in zip(layout.k_bytes_per_layer, layout.v_bytes_per_layer, strict=True)
    ]
    kv_gpu = sum(b for il, b in enumerate(kv_layer) if on_gpu[il])
    compute = compute_buffer_bytes(shape, settings, layout)
    output = output_buffer_bytes(shape, settings)
    if ngl == 0:
        compute_gpu, compute_cpu = 0, compute + output
    else:
        # the GPU holds the working set; the host keeps inputs, logits and, when only
        # some layers are offloaded, a working set of its own
        n_tokens = min(settings.ubatch_size, settings.batch_size)
        host = shape.n_embd * n_tokens * 4 * 2
        compute_gpu = compute
        compute_cpu = output + (host if all(on_gpu) else compute)
    return MemoryNeeds(
        layout=layout,
        gpu_layers=on_gpu,
        weights_gpu=weights_gpu,
        weights_cpu=weights_total - weights_gpu,
        kv_gpu=kv_gpu,
        kv_cpu=layout.total - kv_gpu,
        compute_gpu=compute_gpu,
        compute_cpu=compute_cpu,
    )
