"""Serving memory: will a model (weights, KV cache, compute buffers) fit in free RAM and VRAM."""
