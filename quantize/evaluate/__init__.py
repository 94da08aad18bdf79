"""Side-by-side quality evaluation of quantised GGUFs against a reference.

Perplexity and KL-divergence use the definitions of llama.cpp's ``llama-perplexity``
(``--kl-divergence-base`` / ``--kl-divergence``); see :mod:`quantize.evaluate.compare`
for the entry point and :mod:`quantize.evaluate.base_logits` for the on-disk form of the
reference distributions.
"""

from quantize.evaluate.compare import CompareConfig, run_compare
from quantize.evaluate.gate import gate_failures
from quantize.evaluate.results import CandidateResult, CompareResult, ReferenceResult

__all__ = [
    "CandidateResult",
    "CompareConfig",
    "CompareResult",
    "ReferenceResult",
    "gate_failures",
    "run_compare",
]
