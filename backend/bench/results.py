"""Results of a benchmark run: plain dataclasses with ``to_dict``/``from_dict`` (JSON-ready)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from backend.bench.stats import median, percentile


@dataclass
class RequestRecord:
    """One streamed request, timed with ``time.perf_counter`` on the client."""

    key: str
    start: float
    end: float
    first_token: float | None = None
    chunk_times: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    prompt_tokens: int | None = None
    tokens_from_usage: bool = False
    finish_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.start

    def inter_token_gaps(self) -> list[float]:
        """Seconds between consecutive content chunks (one chunk is one token on our peers)."""
        t = self.chunk_times
        return [b - a for a, b in itertools.pairwise(t)]


def _clean(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 3)


@dataclass
class RepetitionResult:
    """Figures of one timed wave: ``concurrency`` clients, each sending requests back to back."""

    repetition: int
    requests: int
    errors: int
    early_stops: int
    wall_s: float
    generated_tokens: int
    prompt_tokens_mean: float | None
    tokens_per_s: float
    requests_per_s: float
    ttft_ms_p50: float
    ttft_ms_p99: float
    itl_ms_p50: float
    itl_ms_p99: float
    tokens_from_usage: bool
    first_error: str | None = None

    @classmethod
    def from_records(
        cls, repetition: int, records: list[RequestRecord], max_tokens: int
    ) -> RepetitionResult:
        ok = [r for r in records if r.ok]
        errors = [r for r in records if not r.ok]
        wall = max(r.end for r in records) - min(r.start for r in records) if records else 0.0
        generated = sum(r.completion_tokens for r in ok)
        ttfts = [r.ttft_s * 1000.0 for r in ok if r.ttft_s is not None]
        gaps = [g * 1000.0 for r in ok for g in r.inter_token_gaps()]
        prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        return cls(
            repetition=repetition,
            requests=len(records),
            errors=len(errors),
            early_stops=sum(1 for r in ok if r.completion_tokens < max_tokens),
            wall_s=wall,
            generated_tokens=generated,
            prompt_tokens_mean=(sum(prompts) / len(prompts)) if prompts else None,
            tokens_per_s=generated / wall if wall > 0 else math.nan,
            requests_per_s=len(ok) / wall if wall > 0 else math.nan,
            ttft_ms_p50=percentile(ttfts, 50),
            ttft_ms_p99=percentile(ttfts, 99),
            itl_ms_p50=percentile(gaps, 50),
            itl_ms_p99=percentile(gaps, 99),
            tokens_from_usage=bool(ok) and all(r.tokens_from_usage for r in ok),
            first_error=errors[0].error if errors else None,
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {k: (_clean(v) if isinstance(v, float) else v) for k, v in data.items()}


# Figures that a level reports as the median over its repetitions.
MEDIAN_FIELDS = (
    "tokens_per_s",
    "requests_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "wall_s",
)


@dataclass
class LevelResult:
    """One concurrency level of one scenario: its repetitions and their medians."""

    concurrency: int
    repetitions: list[RepetitionResult] = field(default_factory=list)

    def median_of(self, name: str) -> float:
        return median([float(getattr(r, name)) for r in self.repetitions])

    @property
    def tokens_per_s(self) -> float:
        return self.median_of("tokens_per_s")

    @property
    def ttft_ms_p50(self) -> float:
        return self.median_of("ttft_ms_p50")

    @property
    def ttft_ms_p99(self) -> float:
        return self.median_of("ttft_ms_p99")

    @property
    def itl_ms_p50(self) -> float:
        return self.median_of("itl_ms_p50")

    @property
    def itl_ms_p99(self) -> float:
        return self.median_of("itl_ms_p99")

    @property
    def requests_per_s(self) -> float:
        return self.median_of("requests_per_s")

    def medians(self) -> dict[str, float | None]:
        return {name: _clean(self.median_of(name)) for name in MEDIAN_FIELDS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "median": self.medians(),
            "requests": sum(r.requests for r in self.repetitions),
            "errors": sum(r.errors for r in self.repetitions),
            "early_stops": sum(r.early_stops for r in self.repetitions),
            "generated_tokens": sum(r.generated_tokens for r in self.repetitions),
            "repetitions": [r.to_dict() for r in self.repetitions],
        }


@dataclass
class ScenarioResult:
    """All concurrency levels of one scenario (``plain`` or ``shared-prefix``)."""

    name: str
    shared_prefix_tokens: int
    levels: list[LevelResult] = field(default_factory=list)

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "levels": [lv.to_dict() for lv in self.levels],
        }


@dataclass
class BenchResult:
    """A whole run against one server; ``to_dict`` is the JSON the CLI writes."""

    label: str
    url: str
    model: str | None
    endpoint: str
    config: dict[str, Any]
    started_at: str
    duration_s: float = 0.0
    scenarios: list[ScenarioResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    """Facts about the server added by whoever started it (RSS, flags, version)."""

    def scenario(self, name: str) -> ScenarioResult | None:
        return next((s for s in self.scenarios if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "url": self.url,
            "model": self.model,
            "endpoint": self.endpoint,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "config": self.config,
            "server": self.server,
            "notes": self.notes,
            "scenarios": [s.to_dict() for s in self.scenarios],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. a saved JSON file)."""
        scenarios = []
        for s in data.get("scenarios", []):
            levels = []
            for lv in s["levels"]:
                reps = [RepetitionResult(**_nan_for_none(r)) for r in lv["repetitions"]]
                levels.append(LevelResult(concurrency=lv["concurrency"], repetitions=reps))
            scenarios.append(ScenarioResult(s["name"], s["shared_prefix_tokens"], levels))
        return cls(
            label=data["label"],
            url=data["url"],
            model=data.get("model"),
            endpoint=data.get("endpoint", "completions"),
            config=data.get("config", {}),
            started_at=data.get("started_at", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            scenarios=scenarios,
            notes=list(data.get("notes", [])),
            server=dict(data.get("server", {})),
        )


_FLOAT_FIELDS = {
    "tokens_per_s",
    "requests_per_s",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "wall_s",
}


def _nan_for_none(row: dict[str, Any]) -> dict[str, Any]:
    """JSON stores NaN figures as null; turn them back into NaN."""
    return {k: (math.nan if v is None and k in _FLOAT_FIELDS else v) for k, v in row.items()}
