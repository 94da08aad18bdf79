"""Results of a benchmark run: plain dataclasses with ``to_dict``/``from_dict`` (JSON-ready)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from backend.bench.stats import median, percentile
from backend.bench.turns import TURN_FIELDS, turn_figures, turn_medians


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
    text: str = ""
    """The streamed content (a follow-up turn sends it back as the assistant's message)."""
    turn: int | None = None
    """Turn of its conversation (1-based) in the ``follow-up`` scenario."""
    expected_tokens: int | None = None
    """The fixed output length asked for; ``None`` when the model may stop when it likes."""
    similarity: float | None = None
    """``edit``: share of the expected file's lines the answer has right (1.0: exact)."""

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
    turn_ttft_ms_p50: list[float] = field(default_factory=list)
    """``follow-up``: TTFT p50 of turn 1, 2, ... (empty in other scenarios)."""
    turn_ttft_ms_p99: list[float] = field(default_factory=list)
    turn_prompt_tokens_mean: list[float] = field(default_factory=list)
    output_similarity: float | None = None
    """``edit``: mean share of the expected file's lines that the answers got right."""

    @classmethod
    def from_records(cls, repetition: int, records: list[RequestRecord]) -> RepetitionResult:
        """Figures of one wave; an early stop is an answer shorter than the fixed length
        its request asked for (``RequestRecord.expected_tokens``)."""
        ok = [r for r in records if r.ok]
        errors = [r for r in records if not r.ok]
        wall = max(r.end for r in records) - min(r.start for r in records) if records else 0.0
        generated = sum(r.completion_tokens for r in ok)
        ttfts = [r.ttft_s * 1000.0 for r in ok if r.ttft_s is not None]
        gaps = [g * 1000.0 for r in ok for g in r.inter_token_gaps()]
        prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        similar = [r.similarity for r in ok if r.similarity is not None]
        early = [r for r in ok if r.expected_tokens and r.completion_tokens < r.expected_tokens]
        return cls(
            repetition=repetition,
            requests=len(records),
            errors=len(errors),
            early_stops=len(early),
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
            output_similarity=sum(similar) / len(similar) if similar else None,
            **turn_figures(records),
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for name in TURN_FIELDS:  # only follow-up waves have turns
            if data[name]:
                data[name] = [_clean(v) for v in data[name]]
            else:
                del data[name]
        if data["output_similarity"] is None:
            del data["output_similarity"]
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

    def turns(self) -> list[dict[str, Any]]:
        """``follow-up``: per turn, medians over repetitions of its TTFT p50/p99 and prompt
        length; empty for other scenarios."""
        return turn_medians(self.repetitions)

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if turns := self.turns():
            extra["turns"] = turns
        similar = [r.output_similarity for r in self.repetitions if r.output_similarity is not None]
        if similar:
            extra["output_similarity"] = _clean(median(similar))
        return {
            "concurrency": self.concurrency,
            "median": self.medians(),
            **extra,
            "requests": sum(r.requests for r in self.repetitions),
            "errors": sum(r.errors for r in self.repetitions),
            "early_stops": sum(r.early_stops for r in self.repetitions),
            "generated_tokens": sum(r.generated_tokens for r in self.repetitions),
            "repetitions": [r.to_dict() for r in self.repetitions],
        }


@dataclass
class ScenarioResult:
    """All concurrency levels of one scenario (``backend.bench.scenario_names``)."""

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
    out = {k: (math.nan if v is None and k in _FLOAT_FIELDS else v) for k, v in row.items()}
    for name in TURN_FIELDS:
        out[name] = [math.nan if v is None else v for v in row.get(name, [])]
    return out
