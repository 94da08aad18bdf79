"""The ``response`` object: what a request asked for, echoed, with status, output and
usage."""

from __future__ import annotations

import uuid
from typing import Any

from backend.engine.request_types import FinishEvent
from backend.server.responses.schemas import ResponsesRequest


def new_item_id(prefix: str) -> str:
    """OpenAI's ids: ``resp_...``, ``msg_...``, ``fc_...``."""
    return f"{prefix}_{uuid.uuid4().hex}"


def base_response(
    body: ResponsesRequest, response_id: str, created: int, model: str
) -> dict[str, Any]:
    """A response in progress, with no output yet."""
    fmt = body.text.format if body.text and body.text.format else {"type": "text"}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": body.instructions,
        "max_output_tokens": body.max_output_tokens,
        "metadata": body.metadata or {},
        "model": model,
        "output": [],
        "parallel_tool_calls": body.parallel_tool_calls is not False,
        "previous_response_id": body.previous_response_id,
        "reasoning": None,
        "store": body.stores(),
        "temperature": body.temperature,
        "text": {"format": fmt},
        "tool_choice": body.tool_choice or "auto",
        "tools": body.tools or [],
        "top_p": body.top_p,
        "truncation": "disabled",
        "usage": None,
        "user": body.user,
    }


def usage(finish: FinishEvent) -> dict[str, Any]:
    return {
        "input_tokens": finish.prompt_tokens,
        "input_tokens_details": {"cached_tokens": finish.cached_tokens},
        "output_tokens": finish.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": finish.prompt_tokens + finish.completion_tokens,
    }
