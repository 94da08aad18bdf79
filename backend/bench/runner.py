"""The load generator: waves of concurrent streaming clients, repeated, with medians.

``run_benchmark`` is synchronous (it runs its own event loop), so the GUI calls it from a
worker thread; it reports progress through a callback and stops at ``cancel.set()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from backend.bench.client import stream_request
from backend.bench.config import BenchConfig
from backend.bench.errors import BenchCancelled, BenchError
from backend.bench.prompts import shared_prefix
from backend.bench.results import (
    BenchResult,
    LevelResult,
    RepetitionResult,
    RequestRecord,
    ScenarioResult,
)
from backend.bench.sessions import Session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BenchProgress:
    """One progress report: ``done`` of ``total`` timed waves."""

    stage: str
    done: int
    total: int
    message: str


ProgressCallback = Callable[[BenchProgress], None]


def run_benchmark(
    config: BenchConfig,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> BenchResult:
    """Run every scenario and concurrency level of ``config``; raises :class:`BenchError`."""
    config.validate()
    return asyncio.run(_Run(config, progress, cancel or threading.Event()).run())


class _Run:
    def __init__(
        self, config: BenchConfig, progress: ProgressCallback | None, cancel: threading.Event
    ) -> None:
        self.config = config
        self.progress = progress
        self.cancel = cancel
        self.counter = itertools.count()
        self.done = 0
        self.total = len(config.scenarios()) * len(config.concurrency) * config.repetitions

    def report(self, stage: str, message: str) -> None:
        log.info("%s: %s", stage, message)
        if self.progress is not None:
            self.progress(BenchProgress(stage, self.done, self.total, message))

    async def run(self) -> BenchResult:
        config = self.config
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        limits = httpx.Limits(
            max_connections=max(config.concurrency) + 4,
            max_keepalive_connections=max(config.concurrency),
        )
        timeout = httpx.Timeout(config.request_timeout_s, connect=30.0)
        started = time.perf_counter()
        result = BenchResult(
            label=config.label,
            url=config.url,
            model=config.model,
            endpoint=config.endpoint,
            config=config.to_dict(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        async with httpx.AsyncClient(
            base_url=config.base_url, headers=headers, limits=limits, timeout=timeout
        ) as client:
            result.model = config.model or await self._first_model(client)
            for name, prefix_tokens in config.scenarios():
                result.scenarios.append(
                    await self._scenario(client, result.model, name, prefix_tokens)
                )
        result.duration_s = time.perf_counter() - started
        result.notes.extend(_notes(result, config))
        self.report("done", f"finished in {result.duration_s:.1f} s")
        return result

    async def _first_model(self, client: httpx.AsyncClient) -> str | None:
        try:
            response = await client.get("/models")
        except httpx.HTTPError as exc:
            raise BenchError(f"cannot reach {self.config.url}: {exc}") from exc
        if response.status_code == 401:
            raise BenchError(f"{self.config.url} refused the API key (HTTP 401)")
        if response.status_code != 200:
            log.warning("GET /v1/models answered %s; sending no model id", response.status_code)
            return None
        data = response.json().get("data") or []
        return str(data[0]["id"]) if data else None

    async def _scenario(
        self, client: httpx.AsyncClient, model: str | None, name: str, prefix_tokens: int
    ) -> ScenarioResult:
        config = self.config
        scenario = ScenarioResult(name=name, shared_prefix_tokens=prefix_tokens)
        if config.warmup:
            top = max(config.concurrency)
            self.report("warmup", f"{name}: warm-up wave at concurrency {top}")
            prefix = shared_prefix(prefix_tokens, f"{config.seed}:{name}:warmup")
            records = await self._wave(client, Session(config, model, name, prefix), top, 1)
            failed = [r for r in records if not r.ok]
            if len(failed) == len(records):
                raise BenchError(f"every warm-up request failed: {failed[0].error}")
        for concurrency in config.concurrency:
            level = LevelResult(concurrency=concurrency)
            for rep in range(config.repetitions):
                tag = f"{config.seed}:{name}"
                if config.fresh_prefix_per_repetition:
                    tag += f":c{concurrency}:r{rep}"
                session = Session(config, model, name, shared_prefix(prefix_tokens, tag))
                records = await self._wave(client, session, concurrency, config.requests_per_client)
                rep_result = RepetitionResult.from_records(rep, records)
                if rep_result.errors == rep_result.requests:
                    raise BenchError(
                        f"every request failed at concurrency {concurrency}: "
                        f"{rep_result.first_error}"
                    )
                level.repetitions.append(rep_result)
                self.done += 1
                self.report(
                    name,
                    f"c={concurrency} rep {rep + 1}/{config.repetitions}: "
                    f"{rep_result.tokens_per_s:.1f} tok/s, "
                    f"TTFT p50 {rep_result.ttft_ms_p50:.0f} ms, "
                    f"errors {rep_result.errors}",
                )
            scenario.levels.append(level)
        return scenario

    async def _wave(
        self, client: httpx.AsyncClient, session: Session, concurrency: int, per_client: int
    ) -> list[RequestRecord]:
        """``concurrency`` clients each run ``per_client`` sessions (a request, or a
        follow-up conversation) back to back."""
        records: list[RequestRecord] = []

        async def send(key: str, body: dict[str, Any]) -> RequestRecord:
            return await stream_request(client, key, body)

        async def one_client() -> None:
            for _ in range(session.per_client(per_client)):
                key = f"{self.config.seed}:{next(self.counter)}"
                records.extend(await session.run(key, send))

        wave: asyncio.Future[list[None]] = asyncio.gather(
            *(one_client() for _ in range(concurrency))
        )
        watcher: asyncio.Future[None] = asyncio.ensure_future(self._wait_cancel())
        pending: set[asyncio.Future[Any]] = {wave, watcher}
        stopped = True
        try:
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            stopped = not wave.done()
        finally:  # also on KeyboardInterrupt: no request may outlive the client
            for task in (watcher, wave):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if stopped:
            raise BenchCancelled("benchmark cancelled")
        wave.result()
        return records

    async def _wait_cancel(self) -> None:
        while not self.cancel.is_set():
            await asyncio.sleep(0.05)


def _notes(result: BenchResult, config: BenchConfig) -> list[str]:
    notes: list[str] = []
    reps = [r for s in result.scenarios for lv in s.levels for r in lv.repetitions]
    if reps and not all(r.tokens_from_usage for r in reps):
        notes.append("the server did not stream usage; tokens were counted as content chunks")
    for scenario in result.scenarios:
        early = sum(r.early_stops for lv in scenario.levels for r in lv.repetitions)
        if early:
            notes.append(
                f"{early} {scenario.name} requests stopped before "
                f"max_tokens={config.fixed_tokens(scenario.name)} (ignore_eos not honoured?); "
                "throughput counts the tokens actually generated"
            )
    errors = sum(r.errors for r in reps)
    if errors:
        first = next(r.first_error for r in reps if r.first_error)
        notes.append(f"{errors} requests failed; first error: {first}")
    return notes
