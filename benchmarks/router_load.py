"""router_compare's load: a streamed request's time to first token, and streams to two models
at once (aggregate generated tokens/s). Requests go through backend.bench's client, with a
fixed output length (``max_tokens`` and ``ignore_eos``) and a distinct prompt each."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from backend.bench import BenchConfig, RequestRecord
from backend.bench.client import build_body, stream_request
from backend.bench.prompts import request_prompt

REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class LoadShape:
    """What every request looks like: prompt length, output length, the chat API."""

    prompt_tokens: int
    max_tokens: int

    def body(self, model: str, key: str, max_tokens: int | None = None) -> dict[str, Any]:
        config = BenchConfig(url="http://127.0.0.1:1", endpoint="chat", max_tokens=self.max_tokens)
        prompt = request_prompt(self.prompt_tokens, key)
        return build_body(config, model, prompt, max_tokens=max_tokens)


def _client(url: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=30.0)
    return httpx.AsyncClient(base_url=f"{url}/v1", limits=limits, timeout=timeout)


async def _one(url: str, key: str, body: dict[str, Any]) -> RequestRecord:
    async with _client(url, 1) as client:
        return await stream_request(client, key, body)


def first_token_ms(url: str, shape: LoadShape, model: str, key: str, max_tokens: int) -> float:
    """One streamed request to ``model``: milliseconds from sending it to its first content
    chunk (a load the request causes is part of it)."""
    record = asyncio.run(_one(url, key, shape.body(model, key, max_tokens)))
    if record.error or record.ttft_s is None:
        raise RuntimeError(f"request to {model} failed: {record.error or 'no content'}")
    return record.ttft_s * 1000.0


@dataclass
class WaveResult:
    """``per_model`` streams to each model at once."""

    tokens_per_s: float
    tokens: int
    wall_s: float
    tokens_by_model: dict[str, int]
    short: int
    """Requests that ended before ``max_tokens`` (their tokens still count)."""
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens_per_s": round(self.tokens_per_s, 2),
            "tokens": self.tokens,
            "wall_s": round(self.wall_s, 3),
            "tokens_by_model": self.tokens_by_model,
            "short": self.short,
            "errors": self.errors,
        }


async def _wave(
    url: str, shape: LoadShape, models: list[str], per_model: int, tag: str
) -> list[tuple[str, RequestRecord]]:
    async with _client(url, len(models) * per_model) as client:
        jobs = []
        for model in models:
            for i in range(per_model):
                key = f"{tag}:{model}:{i}"
                jobs.append((model, stream_request(client, key, shape.body(model, key))))
        records = await asyncio.gather(*(job for _, job in jobs))
    return [(model, record) for (model, _), record in zip(jobs, records, strict=True)]


def warm_wave(
    url: str, shape: LoadShape, models: list[str], per_model: int, tag: str
) -> WaveResult:
    """``per_model`` streams to each of ``models`` at once; tokens/s is every generated token
    over the wall time from the first request's start to the last one's end. ``tag`` makes
    the prompts (the same tag gives every server the same prompts)."""
    t0 = time.perf_counter()
    pairs = asyncio.run(_wave(url, shape, models, per_model, tag))
    records = [r for _, r in pairs]
    start = min((r.start for r in records), default=t0)
    end = max((r.end for r in records), default=t0)
    by_model = dict.fromkeys(models, 0)
    for model, record in pairs:
        by_model[model] += record.completion_tokens
    tokens = sum(by_model.values())
    wall = max(end - start, 1e-9)
    return WaveResult(
        tokens_per_s=tokens / wall,
        tokens=tokens,
        wall_s=wall,
        tokens_by_model=by_model,
        short=sum(1 for r in records if r.ok and r.completion_tokens < shape.max_tokens),
        errors=[f"{m}: {r.error}" for m, r in pairs if r.error],
    )
