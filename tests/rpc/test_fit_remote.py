"""The fit estimate counts the workers' memory: one share per worker device, the layers
where llama.cpp really puts them, and a worker that does not answer said, not counted."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.rpc.conftest import QUANTDESK, Worker, free_port, layers_as_placed, needs_rpc

pytestmark = [needs_rpc, pytest.mark.model]


def _fit(*args: str) -> dict:
    out = subprocess.run(
        [*QUANTDESK, "models", "fit", "default", "-c", "512", "-np", "1", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def test_fit_splits_by_tensor_split_and_places_layers_as_llama_cpp_does(
    start_worker: Callable[..., Worker], tmp_path: Path
) -> None:
    workers = [start_worker(), start_worker()]
    endpoints = ",".join(w.endpoint for w in workers)
    fit = _fit("--rpc", endpoints, "-ts", "1,3")
    devices = fit["gpus"]
    assert [d["name"] for d in devices] == [f"RPC{i} ({w.endpoint})" for i, w in enumerate(workers)]
    assert all(d["free_bytes"] > 0 for d in devices)
    assert devices[1]["needed_bytes"] == pytest.approx(3 * devices[0]["needed_bytes"], rel=0.01)
    assert fit["n_gpu_layers"] == 31 and "RPC workers" in fit["message"]
    # what llama.cpp does with the same flags
    actual = layers_as_placed("default", endpoints, tmp_path, "-ts", "1,3")
    log = actual.pop("log")
    assert len(actual) == 31, log[-2000:]
    said = []
    for span in fit["placement"]:  # "layers 0-7 on RPC0 (127.0.0.1:P)", "... + output on ..."
        m = re.match(r"layers? (\d+)(?:-(\d+))?( \+ output)? on (RPC\d)", span)
        assert m, span
        first, last = int(m[1]), int(m[2] or m[1])
        said += [(il, m[4]) for il in range(first, last + 1)]
        if m[3]:
            said.append((30, m[4]))
    assert said == [(il, actual[str(il)]) for il in range(31)]


def test_a_worker_that_does_not_answer_is_said_and_not_counted(
    start_worker: Callable[..., Worker],
) -> None:
    worker = start_worker()
    dead = f"127.0.0.1:{free_port()}"
    fit = _fit("--rpc", f"{worker.endpoint},{dead}")
    assert [d["name"] for d in fit["gpus"]] == [f"RPC0 ({worker.endpoint})"]
    assert dead in fit["gpu_note"] and "unreachable" in fit["gpu_note"]
    assert fit["verdict"] == "fits"
