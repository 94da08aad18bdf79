"""A self-contained HTML report: inline CSS, the plot as an embedded base64 PNG, no scripts."""

from __future__ import annotations

import base64
from html import escape

from backend.compare.results import CompareResult

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.35em .6em;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
tr.fail td{background:#fdecea}.note{color:#666;font-size:.9em}
img{max-width:100%;border:1px solid #ddd}
td.answer{text-align:left;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.85em}
"""


def _row(cells: list[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>" + "".join(cells) + "</tr>"


def _td(value: object, fmt: str = "", left: bool = False) -> str:
    text = format(value, fmt) if fmt and isinstance(value, int | float) else str(value)
    return f'<td class="l">{escape(text)}</td>' if left else f"<td>{escape(text)}</td>"


def _td_unc(value: float, unc: float, fmt: str) -> str:
    """A figure with its standard error: close quants differ by less than the noise."""
    if not unc or unc != unc:
        return _td(value, fmt)
    return f"<td>{escape(format(value, fmt))} ± {escape(format(unc, fmt))}</td>"


def render_html(
    result: CompareResult, plot_png: bytes | None, failing: set[str] | None = None
) -> str:
    """The report as one HTML string; ``failing`` names candidates that broke the gate."""
    failing = failing or set()
    ref = result.reference
    s = result.settings
    head = [
        "model",
        "size MiB",
        "bpw",
        "PPL",
        "PPL ratio",
        "mean KLD",
        "KLD p99",
        "KLD p90",
        "KLD median",
        "RMS Δp %",
        "same top %",
        "load s",
        "prompt tok/s",
        "gen tok/s",
    ]
    rows = [
        _row([f'<th class="l">{h}</th>' if i == 0 else f"<th>{h}</th>" for i, h in enumerate(head)])
    ]
    rows.append(
        _row(
            [
                _td(f"{ref.name} (reference)", left=True),
                _td(ref.size_bytes / 2**20, ".1f"),
                _td(ref.bpw, ".2f"),
                _td(ref.ppl, ".4f"),
                _td("1"),
                _td("0"),
                _td("—"),
                _td("—"),
                _td("—"),
                _td("0"),
                _td("100"),
                _td(ref.load_s, ".2f"),
                _td(ref.prompt_tok_s, ".0f"),
                _td(ref.gen_tok_s, ".1f"),
            ]
        )
    )
    for c in result.candidates:
        rows.append(
            _row(
                [
                    _td(c.name, left=True),
                    _td(c.size_bytes / 2**20, ".1f"),
                    _td(c.bpw, ".2f"),
                    _td(c.ppl, ".4f"),
                    _td_unc(c.ppl_ratio, c.ppl_ratio * c.ln_ppl_ratio_unc, ".4f"),
                    _td_unc(c.kld_mean, c.kld_mean_unc, ".5f"),
                    _td(c.kld_p99, ".4f"),
                    _td(c.kld_p90, ".4f"),
                    _td(c.kld_median, ".5f"),
                    _td(c.rms_dp_pct, ".2f"),
                    _td_unc(c.same_top_pct, c.same_top_pct_unc, ".2f"),
                    _td(c.load_s, ".2f"),
                    _td(c.prompt_tok_s, ".0f"),
                    _td(c.gen_tok_s, ".1f"),
                ],
                "fail" if c.name in failing else "",
            )
        )

    names = [ref.name] + [c.name for c in result.candidates]
    answer_rows = [
        _row(['<th class="l">prompt</th>'] + [f'<th class="l">{escape(n)}</th>' for n in names])
    ]
    for a in result.answers:
        cells = [_td(a.prompt, left=True)]
        cells += [f'<td class="answer">{escape(t)}</td>' for t in [a.reference, *a.candidates]]
        answer_rows.append(_row(cells))

    plot = ""
    if plot_png:
        b64 = base64.b64encode(plot_png).decode("ascii")
        plot = (
            '<h2>Quality against size</h2><img alt="KLD and PPL ratio against size" '
            f'src="data:image/png;base64,{b64}">'
        )
    settings = ", ".join(f"{escape(str(k))}={escape(str(v))}" for k, v in s.items())
    gate = ""
    if failing:
        gate = f"<p><b>Gate failed:</b> {escape(', '.join(sorted(failing)))} (highlighted)</p>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>QuantDesk compare: {escape(ref.name)}</title>
<style>{_CSS}</style></head><body>
<h1>Quantisation quality against {escape(ref.name)}</h1>
<p class="note">Perplexity and KL divergence as llama.cpp's
<code>llama-perplexity --kl-divergence</code> computes them: chunks of n_ctx tokens,
the second half of each scored. PPL ratio, KLD and Δp are against the
reference's stored log-probabilities; percentages are 0–100.</p>
{gate}
<h2>Results</h2><table>{"".join(rows)}</table>
{plot}
<h2>Answers (greedy)</h2><table>{"".join(answer_rows)}</table>
<p class="note">Settings: {settings}</p>
</body></html>
"""
