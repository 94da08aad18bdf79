"""The machine's share of the stats body: :class:`SystemStats` and :class:`GpuStats`, as the
probes return them, and :func:`metric_field`, which names a field's Prometheus metric.

Only pydantic and the standard library here, so the GUI can import it without llama.cpp.
A numeric field that Prometheus exports names its metric in ``json_schema_extra``; the
field's description is the metric's help text.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

MetricType = Literal["counter", "gauge"]
METRIC_KEY = "prometheus"
METRIC_TYPE_KEY = "prometheus_type"


def metric_field(description: str, metric: str, metric_type: MetricType = "gauge") -> Any:
    """A required field exported to Prometheus as ``metric`` (its full name)."""
    return Field(
        description=description,
        json_schema_extra={METRIC_KEY: metric, METRIC_TYPE_KEY: metric_type},
    )


class StatsSection(BaseModel):
    """A frozen part of a stats body."""

    model_config = ConfigDict(frozen=True)


class GpuStats(StatsSection):
    """One NVIDIA GPU, as NVML reports it."""

    # in /metrics each GPU is a sample labelled gpu="<index>"
    metric_label: ClassVar[tuple[str, str]] = ("gpu", "index")

    index: int = Field(description="NVML device index")
    name: str = Field(description="Device name")
    vram_used_bytes: int = metric_field("VRAM in use, bytes", "quantdesk_gpu_vram_used_bytes")
    vram_total_bytes: int = metric_field("VRAM size, bytes", "quantdesk_gpu_vram_total_bytes")

    @property
    def vram_free_bytes(self) -> int:
        return self.vram_total_bytes - self.vram_used_bytes


class SystemStats(StatsSection):
    """The server process and the machine it runs on."""

    rss_bytes: int = metric_field("Server resident memory, bytes", "quantdesk_process_rss_bytes")
    cpu_pct: float = metric_field(
        "Server CPU use, percent of one core", "quantdesk_process_cpu_percent"
    )
    ram_used_bytes: int = metric_field("Machine RAM in use, bytes", "quantdesk_ram_used_bytes")
    ram_total_bytes: int = metric_field("Machine RAM, bytes", "quantdesk_ram_total_bytes")
    ram_available_bytes: int = Field(description="Machine RAM available, bytes")
    gpus: list[GpuStats] = Field(description="One entry per NVIDIA GPU; empty without one")
    gpu_note: str | None = Field(description="Why ``gpus`` is empty or partial; null otherwise")
