"""Which device each layer goes to, computed the way llama.cpp's ``load_tensors`` assigns
them (``src/llama-model.cpp``), so that an estimate can say where the layers go before
loading: the input layer on the CPU; the last ``n_gpu_layers`` of the repeating layers and
the output layer over the devices, in device order, by the cumulative share of each
(``--tensor-split``, or each device's free memory), in single precision as llama.cpp does."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CPU = "CPU"


def layer_devices(
    n_layer: int, n_gpu_layers: int, shares: Sequence[float], names: Sequence[str]
) -> list[str]:
    """The device of each repeating layer, then of the output layer (``n_layer + 1``
    names). ``shares``: ``--tensor-split`` proportions, or each device's free bytes when
    no split is given (llama.cpp's default); ``n_gpu_layers`` < 0 means all."""
    if len(shares) != len(names):
        raise ValueError("one share per device")
    ngl = n_layer + 1 if n_gpu_layers < 0 else n_gpu_layers
    if not names or not any(shares):
        return [CPU] * (n_layer + 1)
    cumulative = np.cumsum(np.asarray(shares, dtype=np.float32), dtype=np.float32)
    splits = list(cumulative / cumulative[-1])
    start = max(n_layer + 1 - ngl, 0)
    active = min(ngl, n_layer + 1)
    placement = []
    for il in range(n_layer + 1):
        if il < start or il - start >= active:
            placement.append(CPU)
            continue
        position = np.float32(il - start) / np.float32(active)
        placement.append(names[min(bisect.bisect_right(splits, position), len(names) - 1)])
    return placement


@dataclass(frozen=True)
class LayerSpan:
    device: str
    first: int
    last: int
    output: bool

    def __str__(self) -> str:
        if self.first > self.last:
            return f"output on {self.device}"
        span = (
            f"layer {self.first}" if self.first == self.last else f"layers {self.first}-{self.last}"
        )
        return f"{span}{' + output' if self.output else ''} on {self.device}"


def layer_spans(placement: Sequence[str]) -> list[LayerSpan]:
    """``layer_devices`` as runs of consecutive layers per device (the last entry is the
    output layer)."""
    n_layer = len(placement) - 1
    spans: list[LayerSpan] = []
    for il, device in enumerate(placement[:n_layer]):
        if spans and spans[-1].device == device and spans[-1].last == il - 1:
            spans[-1] = LayerSpan(device, spans[-1].first, il, False)
        else:
            spans.append(LayerSpan(device, il, il, False))
    output = placement[n_layer]
    if spans and spans[-1].device == output:
        spans[-1] = LayerSpan(output, spans[-1].first, spans[-1].last, True)
    else:
        spans.append(LayerSpan(output, n_layer, n_layer - 1, True))  # the output layer alone
    return spans
