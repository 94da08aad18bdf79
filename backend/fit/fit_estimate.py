"""Will it fit? Memory needed to serve a GGUF with given settings, from its header alone.

``estimate_fit(header, settings, memory)`` is a pure function: weights (split per
layer between GPU and CPU the way llama.cpp assigns ``-ngl`` layers), KV cache
(exact), compute buffer (estimate), total, and a verdict against free VRAM per
GPU and free RAM.

KV cache, as llama.cpp allocates it (``llama_kv_cache``): ``n_ctx`` is padded
to 256 cells; with a KV stream per slot (the server's default) each of the
``n_seq`` streams holds ``pad256(n_ctx / n_seq)`` of them, with a unified cache
(``--kv-unified``) all sequences share them. Each layer stores K as
``row_size(type_k, n_head_kv(il) * head_dim_k(il)) * cells`` and the same for V
(with V transposed, i.e. without flash attention, V rows are padded to the
largest layer). ``row_size`` counts whole blocks: q8_0 = 34 bytes per 32
values, q4_0 = 18 per 32, and so on. Sliding-window layers hold
``pad256(min(cells, n_swa * n_seq + n_ubatch))`` cells (unified) or
``pad256(min(stream, n_swa + n_ubatch))`` per stream, unless ``swa_full``.

The compute buffer is the peak of the worst-case graph (a full micro-batch over
a full cache): the largest of the logits, attention-score and feed-forward
working sets plus the activations alive across them. It was fitted against the
sizes llama.cpp reports (see ``tests/hub/test_fit_estimate.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from backend.core.units import human_bytes
from backend.fit.fit_settings import FitSettings
from backend.fit.memory_probe import AvailableMemory
from backend.fit.model_shape import ModelShape
from backend.fit.projector_need import projector_needs
from backend.gguf_file.ggml_types import GGMLType, cache_type
from backend.gguf_file.gguf_header import GGUFHeader
from backend.llama.rpc_placement import layer_devices, layer_spans
from backend.settings.cache_budgets import session_ram_mib
from backend.settings.engine_settings import CacheType, ServingKnobs, tensor_split_values

MiB = 1 << 20
KV_PAD = 256
# Kept free on each GPU for the CUDA context, cuBLAS workspace and fragmentation.
GPU_RESERVE_BYTES = 512 * MiB
# Kept free in RAM for the rest of the process (Python, server, tokenizer).
RAM_RESERVE_BYTES = 256 * MiB

Verdict = Literal["fits", "partial_offload", "wont_fit"]


def _pad(value: int, to: int) -> int:
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class KvLayout:
    cells: int
    swa_cells: int
    k_bytes_per_layer: list[int]
    v_bytes_per_layer: list[int]

    @property
    def k_bytes(self) -> int:
        return sum(self.k_bytes_per_layer)

    @property
    def v_bytes(self) -> int:
        return sum(self.v_bytes_per_layer)

    @property
    def total(self) -> int:
        return self.k_bytes + self.v_bytes


def flash_attention_enabled(settings: FitSettings) -> bool:
    """``auto`` resolves to on: every llama.cpp backend QuantDesk ships (CPU, CUDA) supports it."""
    return settings.flash_attn != "off"


def kv_cache_layout(shape: ModelShape, settings: FitSettings) -> KvLayout:
    """Exact KV-cache bytes per layer for these settings (as llama_kv_cache allocates them)."""
    settings.check()
    type_k: GGMLType = cache_type(settings.cache_type_k)
    type_v: GGMLType = cache_type(settings.cache_type_v)
    n_seq = settings.n_seq_max
    n_ctx = _pad(settings.ctx_size, KV_PAD)
    cells = n_ctx if settings.kv_unified else _pad(n_ctx // n_seq, KV_PAD) * n_seq
    swa_cells = cells
    if any(shape.is_swa) and not settings.swa_full:
        n_ubatch = min(settings.ubatch_size, settings.batch_size)
        if settings.kv_unified:
            swa_cells = _pad(min(cells, shape.n_swa * n_seq + n_ubatch), KV_PAD)
        else:  # each stream is sized alone
            swa_cells = _pad(min(cells // n_seq, shape.n_swa + n_ubatch), KV_PAD) * n_seq
    v_trans = not flash_attention_enabled(settings)
    n_embd_v = [shape.n_head_kv[il] * shape.head_dim_v[il] for il in range(shape.n_layer)]
    v_max = max(n_embd_v) if n_embd_v else 0
    k_bytes, v_bytes = [], []
    for il in range(shape.n_layer):
        layer_cells = swa_cells if shape.is_swa[il] else cells
        n_embd_k = shape.n_head_kv[il] * shape.head_dim_k[il]
        n_v = v_max if v_trans else n_embd_v[il]
        k_bytes.append(type_k.row_bytes(n_embd_k) * layer_cells if n_embd_k else 0)
        v_bytes.append(type_v.row_bytes(n_v) * layer_cells if n_embd_v[il] else 0)
    return KvLayout(cells, swa_cells, k_bytes, v_bytes)


def compute_buffer_bytes(shape: ModelShape, settings: FitSettings, layout: KvLayout) -> int:
    """Estimated peak of llama.cpp's worst-case compute graph (one full micro-batch).

    The graph allocator reuses memory, so the peak is the larger of two phases, not a sum:

    - inside the layers: the attention masks (one per cache kind, ``cells x n_tokens``,
      f32 without flash attention, f16 with it) stay alive throughout, plus either the
      attention scores of one layer (``cells x n_tokens x n_head`` f32, only without
      flash attention) or the feed-forward activations, plus a few hidden states;
    - at the output: the logits of a full micro-batch plus two hidden states.

    Fitted to llama.cpp's reported "compute buffer size" on CPU for a llama and a
    gemma2 (sliding-window) model; see tests/hub/test_fit_estimate.py.
    """
    f32 = 4
    n_tokens = min(_pad(settings.ctx_size, KV_PAD), settings.ubatch_size, settings.batch_size)
    n_outputs = min(n_tokens, settings.batch_size)
    n_head = max(shape.n_head) if shape.n_head else 1
    head_dim = max(shape.head_dim_k) if shape.head_dim_k else 0
    hidden = shape.n_embd * n_tokens * f32
    cells = [layout.cells] + ([layout.swa_cells] if any(shape.is_swa) else [])
    if not settings.kv_unified:  # a stream per slot: each token row sees its stream's cells
        cells = [c // settings.n_seq_max for c in cells]
    feed_forward = 3 * shape.n_ff * n_tokens * f32 + 3 * hidden
    if flash_attention_enabled(settings):
        masks = sum(c * n_tokens * 2 for c in cells)
        attention = 3 * n_head * head_dim * n_tokens * f32 + 3 * hidden
    else:
        masks = sum(c * n_tokens * f32 for c in cells)
        attention = max(cells) * n_tokens * n_head * f32 + 7 * hidden
    layers_phase = masks + max(attention, feed_forward)
    output_phase = shape.n_vocab * n_outputs * f32 + 2 * hidden
    return max(layers_phase, output_phase)


def output_buffer_bytes(shape: ModelShape, settings: FitSettings) -> int:
    """The host buffer for logits, sized for one output per sequence at start-up."""
    return settings.n_seq_max * shape.n_vocab * 4


@dataclass
class GpuShare:
    index: int
    name: str
    needed_bytes: int
    free_bytes: int


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


@dataclass(frozen=True)
class _Needs:
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
class _Draft:
    """A draft model for speculative decoding: its own weights, and a context laid out like
    the served one (same -c, -np, KV types), with ``gpu_layers`` of its own (-ngld)."""

    shape: ModelShape
    gpu_layers: int


@dataclass(frozen=True)
class _Extras:
    """What loads beside the served model: a draft model (``-md``), and a projector
    (``--mmproj``: its weights, and one image's encoder working set)."""

    draft: _Draft | None = None
    projector_weights: int = 0
    projector_compute: int = 0


def _needs(
    shape: ModelShape, settings: FitSettings, has_gpu: bool, extras: _Extras = _Extras()
) -> _Needs:
    """The served model's needs, plus the draft model's and the projector's when there
    are, plus the RAM the session cache may fill (``--cache-ram``: sessions' KV kept past
    their slot)."""
    needs = dataclasses.replace(
        _model_needs(shape, settings, has_gpu),
        session_cpu=session_ram_mib(settings.cache_ram) * MiB,
    )
    if extras.draft is not None:
        draft_settings = settings.model_copy(update={"gpu_layers": extras.draft.gpu_layers})
        d = _model_needs(extras.draft.shape, draft_settings, has_gpu)
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
    weights, compute = extras.projector_weights, extras.projector_compute
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


def _model_needs(shape: ModelShape, settings: FitSettings, has_gpu: bool) -> _Needs:
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
    return _Needs(
        layout=layout,
        gpu_layers=on_gpu,
        weights_gpu=weights_gpu,
        weights_cpu=weights_total - weights_gpu,
        kv_gpu=kv_gpu,
        kv_cpu=layout.total - kv_gpu,
        compute_gpu=compute_gpu,
        compute_cpu=compute_cpu,
    )


def device_fractions(memory: AvailableMemory, tensor_split: str | None) -> list[float]:
    """Each offload device's share of what is offloaded: ``--tensor-split`` when it names
    one proportion per device, else each device's free memory (llama.cpp's default)."""
    if tensor_split:
        parts = tensor_split_values(tensor_split)
        if len(parts) == len(memory.gpus) and sum(parts) > 0:
            return [x / sum(parts) for x in parts]
    total_free = sum(g.vram_free_bytes for g in memory.gpus)
    return [g.vram_free_bytes / total_free if total_free else 0.0 for g in memory.gpus]


def _fits(needs: _Needs, memory: AvailableMemory, fractions: list[float] | None = None) -> bool:
    """RAM holds the CPU's part, and each device its share of the offloaded part."""
    if needs.cpu > memory.ram_free_bytes - RAM_RESERVE_BYTES:
        return False
    if fractions is None:
        fractions = device_fractions(memory, None)
    if needs.gpu and not memory.gpus:
        return False
    return all(
        needs.gpu * fraction <= max(0, g.vram_free_bytes - GPU_RESERVE_BYTES)
        for g, fraction in zip(memory.gpus, fractions, strict=True)
    )


def _gpu_shares(gpu_bytes: int, memory: AvailableMemory, fractions: list[float]) -> list[GpuShare]:
    """What each offload device holds of ``gpu_bytes``, by ``fractions``."""
    return [
        GpuShare(g.index, g.name, int(gpu_bytes * fraction), g.vram_free_bytes)
        for g, fraction in zip(memory.gpus, fractions, strict=True)
    ]


def _placement(
    n_layer: int, n_gpu_layers: int, memory: AvailableMemory, fractions: list[float]
) -> list[str]:
    """Where the layers go, as llama.cpp's loader assigns them, with the devices' names."""
    if not n_gpu_layers or not memory.gpus:
        return []
    devices = layer_devices(n_layer, n_gpu_layers, fractions, [g.name for g in memory.gpus])
    return [str(span) for span in layer_spans(devices)]


def _largest_fitting_ctx(
    shape: ModelShape,
    settings: FitSettings,
    memory: AvailableMemory,
    has_gpu: bool,
    extras: _Extras,
    fractions: list[float],
) -> int | None:
    def fits(ctx: int) -> bool:
        trial = settings.model_copy(update={"ctx_size": ctx})
        return _fits(_needs(shape, trial, has_gpu, extras), memory, fractions)

    lo, hi = 1, _pad(settings.ctx_size, KV_PAD) // KV_PAD
    if not fits(KV_PAD):
        return None
    while lo < hi:  # largest multiple of 256 that fits
        mid = (lo + hi + 1) // 2
        if fits(mid * KV_PAD):
            lo = mid
        else:
            hi = mid - 1
    return lo * KV_PAD


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
        the_draft = _Draft(ModelShape.from_header(draft), settings.gpu_layers if ngld < 0 else ngld)
    extras = _Extras(the_draft, *(projector_needs(projector) if projector else (0, 0)))
    needs = _needs(shape, settings, has_gpu, extras)
    fractions = device_fractions(memory, settings.tensor_split)
    verdict: Verdict
    suggested_layers = suggested_ctx = None
    suggested_cache: CacheType | None = None
    if _fits(needs, memory, fractions):
        verdict = "fits"
        remote = sum(1 for g in memory.gpus if g.name.startswith("RPC"))
        local = len(memory.gpus) - remote
        target = "the GPU" if not remote else "the RPC workers"
        if remote and local:
            target = "the GPUs and RPC workers"
        where = (
            f"on {target}"
            if has_gpu and all(needs.gpu_layers)
            else ("in RAM" if not has_gpu else f"split between {target} and RAM")
        )
        message = f"fits {where}: needs {human_bytes(needs.gpu + needs.cpu)}"
        if needs.draft_bytes:
            message += f", of which the draft model {human_bytes(needs.draft_bytes)}"
    else:
        verdict, message = "wont_fit", "does not fit in free memory"
        if has_gpu:
            for ngl in range(shape.n_layer, -1, -1):
                trial = _needs(
                    shape, settings.model_copy(update={"gpu_layers": ngl}), has_gpu, extras
                )
                if _fits(trial, memory, fractions):
                    verdict, suggested_layers = "partial_offload", ngl
                    message = (
                        f"fits with {ngl} of {shape.n_layer + 1} layers on the GPU "
                        f"(-ngl {ngl}); the rest runs on the CPU"
                        if ngl
                        else "fits only on the CPU (-ngl 0): the GPU has too little free memory"
                    )
                    break
        if verdict == "wont_fit":
            suggested_ctx = _largest_fitting_ctx(
                shape, settings, memory, has_gpu, extras, fractions
            )
            cache: CacheType
            for cache in ("q8_0", "q4_0"):
                trial_settings = settings.model_copy(
                    update={
                        "cache_type_k": cache,
                        "cache_type_v": cache,
                        "flash_attn": "on" if settings.flash_attn == "off" else settings.flash_attn,
                    }
                )
                if _fits(_needs(shape, trial_settings, has_gpu, extras), memory, fractions):
                    suggested_cache = cache
                    break
            hints = []
            if suggested_ctx:
                hints.append(f"a context of at most {suggested_ctx} (-c {suggested_ctx})")
            if suggested_cache:
                hints.append(
                    f"a {suggested_cache} KV cache (-ctk {suggested_cache} -ctv {suggested_cache})"
                )
            message = (
                ("does not fit; it would with " + " or ".join(hints))
                if hints
                else ("does not fit even with the smallest context: choose a smaller quant")
            )
    gpu_bytes = needs.gpu if has_gpu else 0
    warnings: list[str] = []
    n_ctx_train = header.context_length
    per_seq = (
        needs.layout.cells if settings.kv_unified else needs.layout.cells // settings.n_seq_max
    )
    if n_ctx_train and per_seq > n_ctx_train:
        warnings.append(
            f"a sequence may use {per_seq} tokens of context, more than the {n_ctx_train} "
            "the model was trained on: quality may drop past that"
        )
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
        verdict=verdict,
        message=message,
        suggested_gpu_layers=suggested_layers,
        suggested_n_ctx=suggested_ctx,
        suggested_cache_type=suggested_cache,
        ram_free_bytes=memory.ram_free_bytes if memory.ram_free_bytes < (1 << 61) else None,
        vram_free_bytes=memory.vram_free_bytes if memory.gpus else None,
        gpus=_gpu_shares(gpu_bytes, memory, fractions),
        placement=_placement(
            shape.n_layer, sum(needs.gpu_layers) if has_gpu else 0, memory, fractions
        ),
        gpu_note=memory.gpu_note,
        warnings=warnings,
    )
