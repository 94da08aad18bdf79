"""Deployment gate: which candidates exceed ``--max-kld`` / ``--max-ppl-ratio``."""

from __future__ import annotations

from backend.compare.results import CompareResult


def gate_failures(
    result: CompareResult, max_kld: float | None = None, max_ppl_ratio: float | None = None
) -> list[str]:
    """One line per failing candidate, naming it and the limit it broke (empty = all pass)."""
    failures: list[str] = []
    for cand in result.candidates:
        reasons = []
        if max_kld is not None and not (cand.kld_mean <= max_kld):
            reasons.append(f"mean KLD {cand.kld_mean:.6f} > {max_kld:g}")
        if max_ppl_ratio is not None and not (cand.ppl_ratio <= max_ppl_ratio):
            reasons.append(f"PPL ratio {cand.ppl_ratio:.4f} > {max_ppl_ratio:g}")
        if reasons:
            failures.append(f"{cand.name}: " + ", ".join(reasons))
    return failures
