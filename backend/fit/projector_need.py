"""What a multimodal projector (``--mmproj``) takes: its weights, and the working set of
encoding one image, from its GGUF header.

The encoder's working set is estimated from the vision tower's shape: one layer's
activations over the image's patches (embeddings, attention projections and the
feed-forward), plus the attention scores of every head (patches x patches, in F32) that the
non-flash attention path holds. It is an estimate, written as one; an image encoded with
flash attention needs less.
"""

from __future__ import annotations

from backend.gguf_file.gguf_header import GGUFHeader

_F32 = 4


def projector_needs(header: GGUFHeader) -> tuple[int, int]:
    """(weights bytes, compute bytes) of the projector in ``header``."""
    image = header.count("clip.vision.image_size")
    patch = header.count("clip.vision.patch_size")
    hidden = header.count("clip.vision.embedding_length")
    ff = header.count("clip.vision.feed_forward_length")
    heads = header.count("clip.vision.attention.head_count", 1)
    patches = (image // patch) ** 2 if image and patch else 0
    compute = _F32 * patches * (4 * hidden + ff + heads * patches)
    return header.tensor_bytes, compute
