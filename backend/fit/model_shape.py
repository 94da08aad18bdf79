"""What the fit estimate needs from a GGUF header: layer count, heads, head sizes, sliding-
window layers and the bytes of each layer's weights."""

from __future__ import annotations

from dataclasses import dataclass

from backend.fit.errors import FitError
from backend.gguf_file.gguf_header import GGUFHeader
from backend.gguf_file.gguf_parser import ArrayInfo

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
