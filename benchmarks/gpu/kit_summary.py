"""The kit's short text summary, and the log tails it writes beside the JSON (stdlib only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MiB = 1 << 20


def _mib(value: Any) -> str:
    return "-" if value is None else f"{value / MiB:.0f} MiB"


def _fit_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for label, r in result.get("settings", {}).items():
        if "fit" not in r:
            lines.append(f"    -ngl {label}: {r.get('error')}")
            continue
        fit = r["fit"]
        load = r.get("load", {})
        lines.append(
            f"    -ngl {label:<4} ({r['ngl']:>3}): fit {fit['verdict']}, estimate GPU "
            f"{_mib(fit['gpu_bytes'])} RAM {_mib(fit['cpu_bytes'])}; measured VRAM delta "
            f"{_mib(r.get('vram_peak_delta'))} "
            f"(ratio {r.get('vram_ratio_measured_over_estimate')}),"
            f" RSS {_mib(r.get('rss_after_load'))}; served ngl {r.get('served_n_gpu_layers')},"
            f" {load.get('tokens_per_s')} tok/s, errors {load.get('errors')}"
        )
    return lines


def _peer_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for label, scenarios in result.get("paired_tokens_per_s_vs_llama_server", {}).items():
        for scenario, rows in scenarios.items():
            for row in rows:
                lo, hi = row["interval"]
                lines.append(
                    f"    {label} / llama-server tok/s, {scenario} c={row['concurrency']}: "
                    f"{row['median']:.2f} [{lo:.2f}, {hi:.2f}] over {len(row['ratios'])} passes"
                )
    for label, table in result.get("ratios_vs_llama_server", {}).items():
        for scenario, rows in table.items():
            for row in rows:
                lines.append(
                    f"    {label} / llama-server TTFT p50 {row['ttft_ms_p50']} p99 "
                    f"{row['ttft_ms_p99']} ({scenario} c={row['concurrency']})"
                )
    stats = result.get("stats_under_load")
    if stats:
        bad = [k for k, v in stats["checks"].items() if v is False]
        lines.append(
            "    /v1/stats + pynvml under load: "
            f"{'plausible' if stats['ok'] else 'FAILED ' + str(bad)}"
            f" ({stats['n_samples']} samples, max running {stats['max_running']}, max gen "
            f"{stats['max_gen_tokens_per_s']} tok/s, VRAM {stats['vram_used_min_max']}, "
            f"note {stats['gpu_note']!r})"
        )
    return lines


def _oversize_lines(result: dict[str, Any]) -> list[str]:
    if "serve" not in result:
        return []
    serve = result["serve"]
    return [
        f"    -c {result['ctx']} ({result['cache_type']} KV) vs {result['memory']}: fit "
        f"{result['fit']['verdict']} ({result['fit']['message']}); serve: {serve['verdict']}, "
        f"exit {serve['exit_code']} after {serve['seconds']} s",
        *[f"      {line[:160]}" for line in serve.get("error_lines", [])[-2:]],
    ]


def _kld_lines(result: dict[str, Any]) -> list[str]:
    if "gpu" not in result or "cpu" not in result:
        return []
    g, c = result["gpu"], result["cpu"]
    return [
        f"    KLD Q4_K_M vs Q8_0: -ngl 99 {g['kld_mean']:.6f} ± {g['kld_mean_unc']:.6f}, -ngl 0 "
        f"{c['kld_mean']:.6f} ± {c['kld_mean_unc']:.6f} (difference "
        f"{result['kld_difference']:.2e}, tolerance {result['tolerance']:.2e})"
    ]


def _router_lines(result: dict[str, Any]) -> list[str]:
    if "rss_taken_mib" not in result:
        return []
    vram = (
        f"VRAM taken {result['vram_taken_mib']} MiB, left after unload {result['vram_left_mib']}"
        f" MiB; "
        if "vram_taken_mib" in result
        else "no NVML; "
    )
    return [
        f"    library router, {result['model']}: load {result.get('load_s')} s, estimate "
        f"{_mib(result.get('estimate_bytes'))}; {vram}RSS taken {result['rss_taken_mib']} MiB, "
        f"left {result['rss_left_mib']} MiB"
    ]


def _spec_lines(result: dict[str, Any]) -> list[str]:
    gain = result.get("gain_over_no_speculation")
    if not gain:
        return []
    return [
        f"    edit answers replayed on this device's decode costs {result['decode_ms_by_rows']} ms:"
        f" oracle {gain['oracle']}x, our policy {gain['cost']}x, hindsight {gain['hindsight']}x,"
        f" whole drafts {gain['full']}x"
    ]


def _vision_lines(result: dict[str, Any]) -> list[str]:
    vram = result.get("vram") or {}
    return [
        f"    {result['vision']} tower ({result['mmproj_mib']} MiB projector): encode "
        f"{result['encode_ms_avg']} ms/image, projector VRAM {vram.get('projector_mib')} MiB, "
        f"TTFT cold {result['ttft_cold_s']} s, repeat {result['ttft_repeat_s']} s, text "
        f"stream gap max {result['stream_gap_max_during_s']} s while images arrive"
    ]


DETAIL = {
    "fit": _fit_lines,
    "peer": _peer_lines,
    "oversize": _oversize_lines,
    "kld": _kld_lines,
    "router": _router_lines,
    "spec": _spec_lines,
    "vision": _vision_lines,
}


def _brief(step: dict[str, Any]) -> str:
    r = step["result"]
    name = step["name"]
    if name == "env":
        return f"{r.get('mode')}, {r.get('nvidia_smi') or 'no nvidia-smi'}, {r.get('cpus')} CPUs"
    if name == "build-wait":
        return f"build {r.get('build_seconds')} s, libggml-cuda {r.get('libggml_cuda')}"
    if name == "synth":
        return f"{r.get('n_params')} params, F16 {_mib(r.get('f16_bytes'))}"
    if name == "imports":
        return (
            f"local GPU devices {r.get('gpu_devices')}, rpc {r.get('supports_rpc')}, "
            f"devices {r.get('ggml_devices')}"
        )
    if name == "quantize":
        return ", ".join(f"{k} {_mib(v)}" for k, v in r.get("sizes", {}).items())
    if name == "deps":
        return f"{r.get('wheels')} wheels, {r.get('install')}"
    return ""


def summary(data: dict[str, Any]) -> str:
    lines = [
        f"GPU check kit, {data['mode']}, finished {data['finished_at']}, "
        f"{data['wall_s']} s of a {data['budget_s']} s budget",
    ]
    for step in data["steps"]:
        head = f"{step['status'].upper():<7} {step['name']:<10} {step['seconds']:>6.1f} s"
        if step["reason"]:
            head += f"  ({step['reason'][:200]})"
        elif brief := _brief(step):
            head += f"  {brief}"
        lines.append(head)
        if step["status"] != "skipped" and step["name"] in DETAIL:
            try:
                lines.extend(DETAIL[step["name"]](step["result"]))
            except (KeyError, TypeError, ValueError) as exc:
                lines.append(f"    (summary of this step failed: {exc!r})")
    counts = {
        s: sum(1 for st in data["steps"] if st["status"] == s)
        for s in ("passed", "failed", "skipped")
    }
    lines.append(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    )
    return "\n".join(lines) + "\n"


def log_tails(logs: Path, lines: int = 40) -> str:
    parts = []
    for log in sorted(logs.glob("*.log")):
        text = log.read_text(errors="replace").splitlines()
        parts.append(f"===== {log.name} (last {min(lines, len(text))} of {len(text)} lines)")
        parts.extend(text[-lines:])
    return "\n".join(parts) + "\n"
