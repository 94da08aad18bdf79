"""What a benchmark run does: one frozen settings object, shared by the CLI, GUI and scripts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from backend.bench.errors import BenchError
from backend.bench.scenario_names import EDIT, EXTRA, FOLLOW_UP, PLAIN, SHARED_PREFIX, STORY

Endpoint = Literal["completions", "chat"]


@dataclass(frozen=True)
class BenchConfig:
    """Settings of one load-generator run against one OpenAI-compatible server."""

    url: str
    """Server root, e.g. ``http://127.0.0.1:8080`` (a trailing ``/v1`` is accepted)."""
    label: str = "server"
    """Name of this server in tables and plots."""
    endpoint: Endpoint = "completions"
    """``completions`` streams ``/v1/completions``; ``chat`` streams ``/v1/chat/completions``."""
    model: str | None = None
    """Model id sent in requests; ``None`` asks ``/v1/models`` for the first one."""
    api_key: str | None = None
    concurrency: tuple[int, ...] = (1, 4, 8, 16)
    repetitions: int = 3
    requests_per_client: int = 2
    """Closed loop: each of the ``c`` clients sends this many requests back to back."""
    prompt_tokens: int = 64
    """Length of each request's own (distinct) prompt, in approximate tokens."""
    max_tokens: int = 64
    """Fixed output length (sent with ``ignore_eos``)."""
    shared_prefix_tokens: int = 1000
    """Length of the shared system prompt of the prefix scenario; 0 skips that scenario."""
    include_plain: bool = True
    """Also run the scenario without a shared prefix."""
    extra_scenarios: tuple[str, ...] = ()
    """Scenarios run after those two, any of ``follow-up``, ``edit`` and ``story``
    (``backend.bench.scenario_names``)."""
    turns: int = 4
    """``follow-up``: turns of each conversation."""
    turn_tokens: int = 50
    """``follow-up``: length of each user message, in approximate tokens."""
    edit_code_tokens: int = 400
    """``edit``: length of the code file in the prompt, in approximate tokens."""
    edit_max_tokens: int = 480
    """``edit``: output cap; the answer ends where the model stops (no ``ignore_eos``)."""
    story_max_tokens: int = 256
    """``story``: fixed output length."""
    fresh_prefix_per_repetition: bool = True
    """A new shared prefix for every repetition, so each one starts with the prefix uncached."""
    warmup: bool = True
    """Run one untimed wave at the highest concurrency before each scenario."""
    ignore_eos: bool = True
    stream_usage: bool = True
    """Ask for ``stream_options.include_usage`` and count tokens from it when given."""
    temperature: float = 0.0
    seed: int = 1234
    request_timeout_s: float = 300.0
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Extra JSON fields merged into every request body."""

    def validate(self) -> None:
        """Raise :class:`BenchError` naming the first bad value."""
        if not self.url.startswith(("http://", "https://")):
            raise BenchError(f"URL must start with http:// or https://: {self.url!r}")
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise BenchError(f"concurrency levels must be >= 1: {self.concurrency}")
        checks = {
            "repetitions": (self.repetitions, 1),
            "requests_per_client": (self.requests_per_client, 1),
            "prompt_tokens": (self.prompt_tokens, 1),
            "max_tokens": (self.max_tokens, 1),
            "shared_prefix_tokens": (self.shared_prefix_tokens, 0),
            "turns": (self.turns, 1),
            "turn_tokens": (self.turn_tokens, 1),
            "edit_code_tokens": (self.edit_code_tokens, 50),
            "edit_max_tokens": (self.edit_max_tokens, 1),
            "story_max_tokens": (self.story_max_tokens, 1),
        }
        for name, (value, low) in checks.items():
            if value < low:
                raise BenchError(f"{name} must be >= {low}, got {value}")
        unknown = [s for s in self.extra_scenarios if s not in EXTRA]
        if unknown:
            raise BenchError(f"unknown scenario(s) {unknown}; extra ones: {', '.join(EXTRA)}")
        if not self.scenarios():
            raise BenchError("nothing to run: no plain scenario and no shared prefix")

    @property
    def base_url(self) -> str:
        """The ``/v1`` root of the server."""
        root = self.url.rstrip("/")
        return root if root.endswith("/v1") else root + "/v1"

    def scenarios(self) -> list[tuple[str, int]]:
        """``(name, shared_prefix_tokens)`` of each scenario, in run order."""
        out: list[tuple[str, int]] = []
        if self.include_plain:
            out.append((PLAIN, 0))
        if self.shared_prefix_tokens > 0:
            out.append((SHARED_PREFIX, self.shared_prefix_tokens))
        out.extend((name, 0) for name in dict.fromkeys(self.extra_scenarios))
        return out

    def only(self, name: str) -> BenchConfig:
        """This config reduced to the one scenario ``name`` (one of :meth:`scenarios`)."""
        return dataclasses.replace(
            self,
            include_plain=name == PLAIN,
            shared_prefix_tokens=self.shared_prefix_tokens if name == SHARED_PREFIX else 0,
            extra_scenarios=(name,) if name in EXTRA else (),
        )

    def fixed_tokens(self, name: str) -> int | None:
        """The output length every request of scenario ``name`` should reach; ``None`` where
        the model decides (``edit``)."""
        if name == EDIT:
            return None
        return self.story_max_tokens if name == STORY else self.max_tokens

    def request_tokens_max(self) -> int:
        """The most KV cells one request of the selected scenarios holds (prompt and output),
        with room for chat templates: what each server slot needs."""
        need = {
            PLAIN: self.prompt_tokens + self.max_tokens,
            SHARED_PREFIX: self.shared_prefix_tokens + self.prompt_tokens + self.max_tokens,
            FOLLOW_UP: self.turns * (self.turn_tokens + self.max_tokens + 16),
            EDIT: self.edit_code_tokens * 6 // 5 + 80 + self.edit_max_tokens,
            STORY: 48 + self.story_max_tokens,
        }
        return max(need[name] for name, _ in self.scenarios()) + 32

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["concurrency"] = list(self.concurrency)
        data["extra_scenarios"] = list(self.extra_scenarios)
        data["api_key"] = "***" if self.api_key else None
        return data
