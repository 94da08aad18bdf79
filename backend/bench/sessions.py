"""What one client sends in a wave, per scenario: single requests, or a whole conversation.

A *session* is the unit a client repeats: one request in ``plain``, ``shared-prefix``,
``edit`` and ``story``; one conversation of ``turns`` requests in ``follow-up``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from backend.bench.client import build_body
from backend.bench.config import BenchConfig
from backend.bench.prompts import request_prompt
from backend.bench.results import RequestRecord
from backend.bench.scenario_names import EDIT, FOLLOW_UP, STORY
from backend.bench.task_prompts import (
    code_file,
    edit_answer_similarity,
    edit_prompt,
    story_prompt,
)

Send = Callable[[str, dict[str, Any]], Awaitable[RequestRecord]]
"""Streams one request body under a key and returns its record."""

CODE_BLOCK_OPENER = "\n\n```python\n"
"""Ends the ``edit`` prompt on the completions API, so the answer starts with the code."""


@dataclass(frozen=True)
class Session:
    """Everything one wave's sessions share."""

    config: BenchConfig
    model: str | None
    scenario: str
    prefix: str = ""
    """The shared system prompt (``shared-prefix``); empty otherwise."""

    def per_client(self, requested: int) -> int:
        """Sessions each client runs: a follow-up client holds one conversation."""
        return 1 if self.scenario == FOLLOW_UP else requested

    async def run(self, key: str, send: Send) -> list[RequestRecord]:
        """One session under ``key``, which makes its prompts distinct from all others."""
        config = self.config
        if self.scenario == FOLLOW_UP:
            return await self._conversation(key, send)
        if self.scenario == EDIT:
            return [await self._edit(key, send)]
        if self.scenario == STORY:
            body = build_body(
                config, self.model, story_prompt(key), max_tokens=config.story_max_tokens
            )
        else:
            prompt = request_prompt(config.prompt_tokens, key)
            body = build_body(config, self.model, prompt, system=self.prefix)
        record = await send(key, body)
        record.expected_tokens = config.fixed_tokens(self.scenario)
        return [record]

    async def _conversation(self, key: str, send: Send) -> list[RequestRecord]:
        """``turns`` chat requests; each resends the earlier messages, the answers as they
        came back, plus a new user message. A failed turn ends the conversation."""
        config = self.config
        history: list[dict[str, str]] = []
        records: list[RequestRecord] = []
        for turn in range(1, config.turns + 1):
            message = request_prompt(config.turn_tokens, f"{key}:turn{turn}")
            body = build_body(config, self.model, message, history=history, chat=True)
            record = await send(f"{key}:turn{turn}", body)
            record.turn = turn
            record.expected_tokens = config.max_tokens
            records.append(record)
            if not record.ok:
                break
            history += [
                {"role": "user", "content": message},
                {"role": "assistant", "content": record.text},
            ]
        return records

    async def _edit(self, key: str, send: Send) -> RequestRecord:
        """The file back with one change; the model decides where the answer ends (forcing
        past its end would time garbage), so tokens/s counts what it generated."""
        config = self.config
        task = code_file(config.edit_code_tokens, key)
        chat = config.endpoint == "chat"
        prompt = edit_prompt(task) + ("" if chat else CODE_BLOCK_OPENER)
        body = build_body(
            config, self.model, prompt, max_tokens=config.edit_max_tokens, ignore_eos=False
        )
        record = await send(key, body)
        if record.ok:
            record.similarity = edit_answer_similarity(task, record.text, block_open=not chat)
        return record
