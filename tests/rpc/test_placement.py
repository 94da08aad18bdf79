"""Where the layers go: our reading of llama.cpp's assignment against llama.cpp's own log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from backend.llama.rpc_placement import layer_devices, layer_spans
from tests.rpc.conftest import Worker, layers_as_placed, needs_rpc


def test_spans_read_as_a_person_would_say_them() -> None:
    placement = layer_devices(30, -1, [1, 3], ["RPC0", "RPC1"])
    assert [str(s) for s in layer_spans(placement)] == [
        "layers 0-7 on RPC0",
        "layers 8-29 + output on RPC1",
    ]
    partial = layer_devices(30, 10, [1, 1], ["RPC0", "RPC1"])
    assert [str(s) for s in layer_spans(partial)] == [
        "layers 0-20 on CPU",
        "layers 21-25 on RPC0",
        "layers 26-29 + output on RPC1",
    ]
    assert [str(s) for s in layer_spans(layer_devices(4, 1, [1], ["CUDA0"]))] == [
        "layers 0-3 on CPU",
        "output on CUDA0",
    ]
    assert layer_devices(4, -1, [], []) == ["CPU"] * 5


@needs_rpc
@pytest.mark.model
@pytest.mark.parametrize("split", ["1,3", None])
def test_llama_cpp_places_the_layers_where_we_say(
    start_worker: Callable[..., Worker], tmp_path: Path, split: str | None
) -> None:
    workers = [start_worker(), start_worker()]
    endpoints = ",".join(worker.endpoint for worker in workers)
    actual = layers_as_placed("default", endpoints, tmp_path, *(["-ts", split] if split else []))
    text = actual.pop("log")
    assert len(actual) == 31, text[-2000:]
    shares = [1.0, 3.0] if split else [1.0, 1.0]  # two workers on one machine: same free RAM
    expected = layer_devices(30, -1, shares, ["RPC0", "RPC1"])
    assert [actual[str(il)] for il in range(31)] == expected
    spans = ", ".join(map(str, layer_spans(expected)))
    assert f"placement: {spans}" in text
