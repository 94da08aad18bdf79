"""A KV cache and a decode without a model, for admission and step-planning tests.

:class:`RecordingKv` is the engine's own cell accounting (what :class:`KvCache` counts
beside llama.cpp) and logs each change :class:`KvCache` would make in llama.cpp.
:func:`decode` applies a step plan as the scheduler does after a successful
``llama_decode``: the cells are written, and a sequence whose prompt or last token was
completed gets one more token.
"""

from __future__ import annotations

import numpy as np

from backend.engine.kv_cache import KvAccounting
from backend.engine.request_types import GenerationRequest, SamplingParams
from backend.engine.sequence import Sequence
from backend.engine.step_planner import StepPlan
from backend.engine.stop_detector import StopDetector

KvOp = tuple[str, int, int] | tuple[str, int, int, int]


class RecordingKv(KvAccounting):
    def __init__(self, n_cells: int) -> None:
        super().__init__(n_cells)
        self.ops: list[KvOp] = []

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        assert self.length(src) >= n, "copying cells the source does not hold"
        self.ops.append(("copy_prefix", src, dst, n))
        super().copy_prefix(src, dst, n)

    def copy_stream(self, src: int, dst: int) -> None:
        self.ops.append(("copy_stream", src, dst))
        super().copy_stream(src, dst)

    def keep(self, seq_id: int, n: int) -> None:
        self.ops.append(("keep", seq_id, n))
        super().keep(seq_id, n)

    def rm(self, seq_id: int) -> None:
        self.ops.append(("rm", seq_id, -1))
        super().rm(seq_id)

    def take_ops(self) -> list[KvOp]:
        ops, self.ops = self.ops, []
        return ops


def make_seq(
    tokens: list[int], *, max_tokens: int = 8, prompt_logprobs: int | None = None
) -> Sequence:
    """A waiting sequence for ``tokens``; nothing here samples, so it has no sampler."""
    request = GenerationRequest(
        prompt_tokens=list(tokens),
        max_tokens=max_tokens,
        sampling=SamplingParams(temperature=0.0),
        sink=lambda event: None,
        prompt_logprobs=prompt_logprobs,
    )
    return Sequence(
        request=request,
        sampler=None,  # type: ignore[arg-type]
        detector=StopDetector([]),
        tokens=list(tokens),
        prompt_array=np.asarray(tokens, dtype=np.int32),
        n_prompt=len(tokens),
    )


def prompt(head: int, length: int, *, shared: list[int] | None = None) -> list[int]:
    """``shared`` followed by distinct tokens from ``head`` on, ``length`` tokens in all."""
    start = list(shared or [])
    return start + list(range(head, head + length - len(start)))


def decode(kv: KvAccounting, plan: StepPlan, next_token: int = 7) -> None:
    """What a successful step does to the KV and the sequences, with ``next_token`` sampled."""
    for call in plan.calls:
        for seq, n in call:
            kv.add_cells(seq.seq_id, n)
            seq.n_past += n
            if seq.n_past == len(seq.tokens):
                seq.tokens.append(next_token)
                seq.completion_tokens += 1
