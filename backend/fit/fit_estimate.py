"""Will it fit? Memory needed to serve a GGUF with given settings, from its header alone.

``estimate_fit(header, settings, memory)`` is a pure function: weights (split per
layer between GPU and CPU the way llama.cpp assigns ``-ngl`` layers), KV cache
(exact), compute buffer (estimate), total, and a verdict against free VRAM per
GPU and free RAM.

KV cache, as llama.cpp allocates it (``llama_kv_cache``): ``n_ctx`` is padded
to 256 cells; with a unified cache (what the QuantDesk server uses) all
sequences share those cells. Each layer stores K as
``row_size(type_k, n_head_kv(il) * head_dim_k(il)) * cells`` and the same for V
(with V transposed, i.e. without flash attention, V rows are padded to the
largest layer). ``row_size`` counts whole blocks: q8_0 = 34 bytes per 32
values, q4_0 = 18 per 32, and so on. Sliding-window layers hold
``pad256(min(cells, n_swa * n_seq + n_ubatch))`` cells unless ``swa_full``.

The compute buffer is the peak of the worst-case graph (a full micro-batch over
a full cache): the largest of the logits, attention-score and feed-forward
working sets plus the activations alive across them. It was fitted against the
sizes llama.cpp reports (see ``tests/hub/test_fit_estimate.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from backend.core.units import human_bytes
from backend.fit.errors import FitError
from backend.fit.memory_probe import AvailableMemory
from backend.gguf_file.ggml_types import CACHE_TYPES, GGMLType, cache_type
from backend.gguf_file.gguf_header import ArrayInfo, GGUFHeader

MiB = 1 << 20
KV_PAD = 256
# Kept free on each GPU for the CUDA context, cuBLAS workspace and fragmentation.
GPU_RESERVE_BYTES = 512 * MiB
# Kept free in RAM for the rest of the process (Python, server, tokenizer).
RAM_RESERVE_BYTES = 256 * MiB

Verdict = Literal["fits", "partial_offload", "wont_fit"]

# Architectures with interleaved sliding-window attention: (pattern, dense_first),
# as in llama.cpp's load_swa_pattern() calls; a layer is SWA when
# dense_first: il % p != 0, else il % p < p - 1.
_SWA_PATTERNS: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False),
    "gemma3": (6, False),
    "gemma3n": (5, False),
    "cohere2": (4, False),
    "cohere2moe": (4, True),
    "exaone4": (4, False),
    "exaone-moe": (4, False),
    "olmo2": (4, False),
    "gpt-oss": (2, False),
    "llama4": (4, False),
    "mellum": (4, False),
    "afmoe": (4, False),
    "smallthinker": (4, True),
    "plamo3": (8, False),
    "laguna": (4, True),
}
# Defaults llama.cpp uses when the GGUF has no sliding_window key.
_SWA_DEFAULT_WINDOW = {"gemma2": 4096, "llama4": 8192, "exaone4": 4096}


@dataclass(frozen=True)
class FitSettings:
    """The serving settings that change memory use (llama-server names in comments)."""

    n_ctx: int = 4096  # -c: total KV cells (unified: shared by all sequences)
    n_parallel: int = 4  # -np
    prefix_cache_entries: int = 8  # extra sequences kept for prefix reuse
    cache_type_k: str = "f16"  # -ctk
    cache_type_v: str = "f16"  # -ctv
    n_gpu_layers: int = -1  # -ngl: -1 = all layers and the output layer
    n_batch: int = 512  # -b
    n_ubatch: int = 512  # -ub
    flash_attn: str = "auto"  # -fa: auto, on, off
    kv_unified: bool = True
    swa_full: bool = True  # llama.cpp's context default: full-size SWA cache

    @property
    def n_seq_max(self) -> int:
        return max(1, self.n_parallel + self.prefix_cache_entries)

    def validate(self) -> None:
        for name in ("cache_type_k", "cache_type_v"):
            if getattr(self, name).lower() not in CACHE_TYPES:
                raise FitError(f"{name} must be one of {', '.join(CACHE_TYPES)}")
        if self.n_ctx < 1 or self.n_batch < 1 or self.n_ubatch < 1 or self.n_parallel < 1:
            raise FitError("n_ctx, n_batch, n_ubatch and n_parallel must be positive")
        if self.flash_attn not in ("auto", "on", "off"):
            raise FitError("flash_attn must be auto, on or off")
        if self.cache_type_v.lower() not in ("f16", "f32", "bf16") and self.flash_attn == "off":
            raise FitError("a quantised V cache needs flash attention (-fa on or auto)")


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs from a GGUF header."""

    architecture: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_head: list[int]
    n_head_kv: list[int]
    head_dim_k: list[int]
    head_dim_v: list[int]
    n_ff: int
    is_swa: list[bool]
    n_swa: int
    layer_bytes: list[int]
    other_bytes: int
    output_bytes: int
    input_bytes: int
    tied_output_bytes: int  # a GPU copy of token_embd when the output layer reuses it

    @classmethod
    def from_header(cls, header: GGUFHeader) -> ModelShape:
        n_layer = header.block_count
        if n_layer <= 0:
            raise FitError(
                f"{header.path.name}: no {header.architecture}.block_count in the header"
            )
        n_embd = header.embedding_length
        n_head = header.per_layer("attention.head_count", n_layer)
        n_head_kv_raw = header.arch_get("attention.head_count_kv")
        n_head_kv = (
            header.per_layer("attention.head_count_kv", n_layer)
            if n_head_kv_raw is not None
            else list(n_head)
        )
        head0 = max(n_head) or 1
        dk_full = header.arch_count("attention.key_length") or n_embd // head0
        dv_full = header.arch_count("attention.value_length") or n_embd // head0
        dk_swa = header.arch_count("attention.key_length_swa") or dk_full
        dv_swa = header.arch_count("attention.value_length_swa") or dv_full
        is_swa, n_swa = _swa_layers(header, n_layer)
        head_dim_k = [dk_swa if s else dk_full for s in is_swa]
        head_dim_v = [dv_swa if s else dv_full for s in is_swa]
        n_vocab = _vocab_size(header)
        n_ff = max(header.per_layer("feed_forward_length", n_layer), default=0)
        n_expert_used = header.arch_count("expert_used_count")
        n_ff_exp = header.arch_count("expert_feed_forward_length")
        if n_expert_used and n_ff_exp:
            n_ff = max(n_ff, n_expert_used * n_ff_exp)
        layer_bytes, other = header.layer_bytes()
        out = header.tensor("output.weight")
        norm = header.tensor("output_norm.weight")
        emb = header.tensor("token_embd.weight")
        output_bytes = (out.n_bytes if out else 0) + (norm.n_bytes if norm else 0)
        input_bytes = other - output_bytes
        tied = emb.n_bytes if emb is not None and out is None else 0
        return cls(
            architecture=header.architecture,
            n_layer=n_layer,
            n_embd=n_embd,
            n_vocab=n_vocab or (emb.shape[1] if emb and len(emb.shape) > 1 else 0),
            n_head=n_head,
            n_head_kv=n_head_kv,
            head_dim_k=head_dim_k,
            head_dim_v=head_dim_v,
            n_ff=n_ff,
            is_swa=is_swa,
            n_swa=n_swa,
            layer_bytes=layer_bytes,
            other_bytes=other,
            output_bytes=output_bytes,
            input_bytes=input_bytes,
            tied_output_bytes=tied,
        )


def _vocab_size(header: GGUFHeader) -> int:
    value = header.arch_count("vocab_size")
    if value:
        return value
    tokens = header.get("tokenizer.ggml.tokens")
    if isinstance(tokens, ArrayInfo):
        return tokens.length
    if isinstance(tokens, list):
        return len(tokens)
    return 0


def _swa_layers(header: GGUFHeader, n_layer: int) -> tuple[list[bool], int]:
    arch = header.architecture
    n_swa = header.arch_count("attention.sliding_window")
    if arch not in _SWA_PATTERNS:
        return [False] * n_layer, 0
    if not n_swa:
        n_swa = _SWA_DEFAULT_WINDOW.get(arch, 0)
    if not n_swa:
        return [False] * n_layer, 0
    pattern_value = header.arch_get("attention.sliding_window_pattern")
    if isinstance(pattern_value, list) and len(pattern_value) >= n_layer:
        return [bool(v) for v in pattern_value[:n_layer]], n_swa
    n_pattern, dense_first = _SWA_PATTERNS[arch]
    if isinstance(pattern_value, int):
        n_pattern = header.arch_count("attention.sliding_window_pattern")
    if n_pattern == 0:
        return [True] * n_layer, n_swa
    if dense_first:
        return [il % n_pattern != 0 for il in range(n_layer)], n_swa
    return [il % n_pattern < n_pattern - 1 for il in range(n_layer)], n_swa


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
    settings.validate()
    type_k: GGMLType = cache_type(settings.cache_type_k)
    type_v: GGMLType = cache_type(settings.cache_type_v)
    n_seq = settings.n_seq_max
    n_ctx = _pad(settings.n_ctx, KV_PAD)
    cells = n_ctx if settings.kv_unified else _pad(n_ctx // n_seq, KV_PAD) * n_seq
    swa_cells = cells
    if any(shape.is_swa) and not settings.swa_full:
        n_ubatch = min(settings.n_ubatch, settings.n_batch)
        per = n_seq if settings.kv_unified else 1
        swa_cells = _pad(min(cells, shape.n_swa * per + n_ubatch), KV_PAD)
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
    n_tokens = min(_pad(settings.n_ctx, KV_PAD), settings.n_ubatch, settings.n_batch)
    n_outputs = min(n_tokens, settings.n_batch)
    n_head = max(shape.n_head) if shape.n_head else 1
    head_dim = max(shape.head_dim_k) if shape.head_dim_k else 0
    hidden = shape.n_embd * n_tokens * f32
    cells = [layout.cells] + ([layout.swa_cells] if any(shape.is_swa) else [])
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
    cache_type_k: str
    cache_type_v: str
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
    suggested_cache_type: str | None = None
    ram_free_bytes: int | None = None
    vram_free_bytes: int | None = None
    gpus: list[GpuShare] = field(default_factory=list)
    gpu_note: str | None = None
    warnings: list[str] = field(default_factory=list)

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

    @property
    def gpu(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu

    @property
    def cpu(self) -> int:
        return self.weights_cpu + self.kv_cpu + self.compute_cpu


def _needs(shape: ModelShape, settings: FitSettings, has_gpu: bool) -> _Needs:
    layout = kv_cache_layout(shape, settings)
    n_layer = shape.n_layer
    ngl = settings.n_gpu_layers if settings.n_gpu_layers >= 0 else n_layer + 1
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
        n_tokens = min(settings.n_ubatch, settings.n_batch)
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


def _fits(needs: _Needs, memory: AvailableMemory) -> bool:
    ram_budget = memory.ram_free_bytes - RAM_RESERVE_BYTES
    vram_budget = sum(max(0, g.free_bytes - GPU_RESERVE_BYTES) for g in memory.gpus)
    return needs.cpu <= ram_budget and needs.gpu <= vram_budget


def _gpu_shares(gpu_bytes: int, memory: AvailableMemory) -> list[GpuShare]:
    """Layers are split across GPUs in proportion to their free memory (llama.cpp default)."""
    total_free = sum(g.free_bytes for g in memory.gpus)
    return [
        GpuShare(
            g.index,
            g.name,
            gpu_bytes * g.free_bytes // total_free if total_free else 0,
            g.free_bytes,
        )
        for g in memory.gpus
    ]


def _largest_fitting_ctx(
    shape: ModelShape, settings: FitSettings, memory: AvailableMemory, has_gpu: bool
) -> int | None:
    lo, hi = 1, _pad(settings.n_ctx, KV_PAD) // KV_PAD
    if not _fits(_needs(shape, replace(settings, n_ctx=KV_PAD), has_gpu), memory):
        return None
    while lo < hi:  # largest multiple of 256 that fits
        mid = (lo + hi + 1) // 2
        if _fits(_needs(shape, replace(settings, n_ctx=mid * KV_PAD), has_gpu), memory):
            lo = mid
        else:
            hi = mid - 1
    return lo * KV_PAD


def estimate_fit(
    header: GGUFHeader, settings: FitSettings | None = None, memory: AvailableMemory | None = None
) -> FitEstimate:
    """Memory needs of ``header``'s model with ``settings``, judged against ``memory``.

    ``memory=None`` judges against unlimited RAM and no GPU (a pure size estimate).
    """
    settings = settings or FitSettings()
    settings.validate()
    shape = ModelShape.from_header(header)
    if memory is None:
        memory = AvailableMemory(ram_free_bytes=1 << 62, ram_total_bytes=1 << 62, gpu_note="no GPU")
    has_gpu = bool(memory.gpus) and settings.n_gpu_layers != 0
    needs = _needs(shape, settings, has_gpu)
    verdict: Verdict
    suggested_layers = suggested_ctx = None
    suggested_cache: str | None = None
    if _fits(needs, memory):
        verdict = "fits"
        where = (
            "on the GPU"
            if has_gpu and all(needs.gpu_layers)
            else ("in RAM" if not has_gpu else "split between GPU and RAM")
        )
        message = f"fits {where}: needs {human_bytes(needs.gpu + needs.cpu)}"
    else:
        verdict, message = "wont_fit", "does not fit in free memory"
        if has_gpu:
            for ngl in range(shape.n_layer, -1, -1):
                trial = _needs(shape, replace(settings, n_gpu_layers=ngl), has_gpu)
                if _fits(trial, memory):
                    verdict, suggested_layers = "partial_offload", ngl
                    message = (
                        f"fits with {ngl} of {shape.n_layer + 1} layers on the GPU "
                        f"(-ngl {ngl}); the rest runs on the CPU"
                        if ngl
                        else "fits only on the CPU (-ngl 0): the GPU has too little free memory"
                    )
                    break
        if verdict == "wont_fit":
            suggested_ctx = _largest_fitting_ctx(shape, settings, memory, has_gpu)
            for cache in ("q8_0", "q4_0"):
                trial_settings = replace(
                    settings,
                    cache_type_k=cache,
                    cache_type_v=cache,
                    flash_attn="on" if settings.flash_attn == "off" else settings.flash_attn,
                )
                if _fits(_needs(shape, trial_settings, has_gpu), memory):
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
        n_ctx=settings.n_ctx,
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
        gpu_bytes=gpu_bytes,
        cpu_bytes=needs.cpu,
        verdict=verdict,
        message=message,
        suggested_gpu_layers=suggested_layers,
        suggested_n_ctx=suggested_ctx,
        suggested_cache_type=suggested_cache,
        ram_free_bytes=memory.ram_free_bytes if memory.ram_free_bytes < (1 << 61) else None,
        vram_free_bytes=memory.vram_free_bytes if memory.gpus else None,
        gpus=_gpu_shares(gpu_bytes, memory),
        gpu_note=memory.gpu_note,
        warnings=warnings,
    )
