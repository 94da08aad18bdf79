"""PNG plot of KL divergence and PPL ratio against file size, one point per quant."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from backend.compare.results import CompareResult


def plot_png(result: CompareResult) -> bytes:
    """Two panels sharing the x axis (size in MiB): mean KLD (log scale) and PPL ratio."""
    cands = result.candidates
    sizes = [c.size_bytes / 2**20 for c in cands]
    fig, (ax_kld, ax_ppl) = plt.subplots(1, 2, figsize=(10, 4), dpi=100)
    try:
        ax_kld.plot(sizes, [c.kld_mean for c in cands], "o", color="tab:red")
        ax_kld.errorbar(
            sizes,
            [c.kld_mean for c in cands],
            yerr=[c.kld_mean_unc for c in cands],
            fmt="none",
            ecolor="tab:red",
            alpha=0.5,
        )
        if all(c.kld_mean > 0 for c in cands):
            ax_kld.set_yscale("log")
        ax_kld.set_ylabel("mean KL divergence (nats/token)")
        ax_kld.set_title("KL divergence vs reference")
        ax_ppl.plot(sizes, [c.ppl_ratio for c in cands], "s", color="tab:blue")
        ax_ppl.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax_ppl.set_ylabel("PPL(candidate) / PPL(reference)")
        ax_ppl.set_title("Perplexity ratio")
        ref_mb = result.reference.size_bytes / 2**20
        for ax, values in (
            (ax_kld, [c.kld_mean for c in cands]),
            (ax_ppl, [c.ppl_ratio for c in cands]),
        ):
            for c, x, y in zip(cands, sizes, values, strict=True):
                ax.annotate(c.name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
            ax.set_xlabel(f"file size (MiB; reference {ref_mb:.0f} MiB)")
            ax.grid(alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)
