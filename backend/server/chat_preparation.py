"""A chat request made ready for the engine: the one preparation behind every chat dialect.

``/v1/chat/completions`` (``routes/chat.py``), Anthropic's ``/v1/messages``
(``routes/messages.py``) and OpenAI's ``/v1/responses`` (``routes/responses.py``) each
translate their body into a :class:`~backend.server.schemas.ChatCompletionRequest` and
call :func:`prepare_chat`, so that templating, tool prompts, grammars (forced tool calls,
``response_format``), token budgets and sampling are decided in one place. It does
blocking work (template rendering, tokenising, grammar building): call it through
:func:`~backend.server.generation.off_loop`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from fastapi import Request

from backend.engine.engine import Engine
from backend.engine.media.media_item import MediaItem
from backend.engine.media.media_span import MediaSpan
from backend.engine.request_types import SamplingParams
from backend.server.errors import ApiError
from backend.server.generation import max_tokens_for, sampling_params, seeded_samplings
from backend.server.media_parts import MediaCollector, content_text, has_media
from backend.server.reasoning import OPEN as THINK_OPEN
from backend.server.reasoning import ReasoningSplit, opens_thinking, reasoning_split
from backend.server.schemas import ChatCompletionRequest
from backend.server.structured_output import response_format_grammar
from backend.server.tool_calls import CLOSE as TOOL_CLOSE
from backend.server.tool_calls import (
    forced_function,
    render_messages_for_tools,
    tool_call_grammar,
    tool_names,
)
from backend.settings.server_settings import ReasoningFormat


@dataclasses.dataclass
class PreparedChat:
    """What the engine runs for one chat request, and how to read its output back.

    ``tokens``: the rendered prompt; ``max_tokens``: the budget after the context check;
    ``samplings``: one per choice (distinct seeds); ``stop``: stop strings;
    ``with_tools``: the output may hold tool calls (parse it with ``tool_names``);
    ``with_logprobs``: the client asked for log-probabilities; ``reasoning_format`` and
    ``thinking_open`` (the template opened ``<think>``): how the answer's reasoning is read
    (:meth:`reasoning_split`).
    """

    tokens: list[int]
    max_tokens: int
    samplings: list[SamplingParams]
    stop: list[str]
    with_tools: bool
    with_logprobs: bool
    tool_names: frozenset[str] = frozenset()
    reasoning_format: ReasoningFormat = "auto"
    thinking_open: bool = False
    one_call: bool = False  # parallel_tool_calls false: one tool call at most
    media: list[MediaSpan] = dataclasses.field(default_factory=list)  # the prompt's images

    def engine_stop(self) -> list[str]:
        """The engine's stop strings: the client's, and with ``one_call`` a call's closing
        tag, so that generation ends after the first call (the parser reads a call whose
        closing tag was cut off; the tag itself is no text)."""
        return [*self.stop, TOOL_CLOSE] if self.one_call and self.with_tools else self.stop

    def reasoning_split(self) -> ReasoningSplit | None:
        """A fresh splitter of one answer's reasoning (None with ``--reasoning-format none``)."""
        return reasoning_split(self.reasoning_format, self.thinking_open)


@dataclasses.dataclass
class TemplateInputs:
    """What the chat template renders: the messages (tool calls and results written for
    templates that don't know tools), the tools it is given, and how the prompt ends."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None  # those the request declared (tool_choice none: none)
    template_tools: list[dict[str, Any]] | None  # those passed to the template
    continue_final_message: bool
    media: list[MediaItem] = dataclasses.field(default_factory=list)  # in marker order

    def render_kwargs(self) -> dict[str, Any]:
        return {
            "tools": self.template_tools,
            "continue_final_message": self.continue_final_message,
            "add_generation_prompt": not self.continue_final_message,
        }


def engine_media(engine: Engine) -> MediaCollector:
    """A collector for one request's media, with ``engine``'s limits and modalities."""
    return MediaCollector(
        engine.settings.media_limits(),
        engine.accepts_images,
        engine.accepts_audio,
        engine.model_id,
    )


def template_inputs(body: ChatCompletionRequest, engine: Engine) -> TemplateInputs:
    """The messages and tools of ``body`` as the chat template takes them, each image
    decoded and a media marker in its place; 400 for content parts the model cannot take
    (images without a projector, audio, files)."""
    tools = body.tools if body.tools and body.tool_choice != "none" else None
    messages: list[dict[str, Any]] = []
    media = engine_media(engine)
    for i, m in enumerate(body.messages):
        msg = m.model_dump(exclude_none=True)
        if has_media(m.content) and (engine.accepts_images or engine.accepts_audio):
            assert isinstance(m.content, list)
            msg["content"] = content_text(m.content, media, f"messages[{i}]")
        elif unsupported := m.non_text_parts():
            raise ApiError(
                400,
                f"messages[{i}] has content parts of type {', '.join(sorted(set(unsupported)))}; "
                f"{engine.model_id} takes text only",
                param="messages",
            )
        else:
            msg["content"] = m.text()
        if msg["role"] == "developer":  # OpenAI's newer name; chat templates know "system"
            msg["role"] = "system"
        messages.append(msg)
    knows_tools = "tools" in engine.chat_template.source
    messages = render_messages_for_tools(messages, tools, knows_tools)
    return TemplateInputs(
        messages,
        tools,
        tools if knows_tools else None,
        body.continues_final_message(),  # the request schema checked it is possible
        media.items,
    )


def render_chat_text(body: ChatCompletionRequest, engine: Engine) -> str:
    """The prompt text ``body`` becomes (llama-server's ``/apply-template``): the same
    rendering as :func:`prepare_chat`, before tokenising."""
    inputs = template_inputs(body, engine)
    return engine.chat_template.render(inputs.messages, **inputs.render_kwargs())


def prepare_chat(
    body: ChatCompletionRequest,
    engine: Engine,
    request: Request,
    cancelled: Callable[[], bool] = lambda: False,
) -> PreparedChat:
    """Render, tokenise (encoding images until ``cancelled``) and set up sampling for
    ``body`` (blocking: run it off the loop).

    Raises :class:`~backend.server.errors.ApiError` (400) for content this text-only
    server cannot take, a ``tool_choice`` without tools, or a bad ``response_format``;
    a prompt too long for the context raises the engine's ``ContextOverflowError``.
    """
    if body.tool_choice not in (None, "none", "auto") and not body.tools:
        raise ApiError(400, "tool_choice needs tools", param="tool_choice")
    inputs = template_inputs(body, engine)
    tools = inputs.tools
    forced = forced_function(body.tool_choice, tools) if tools else None
    media: list[MediaSpan] = []
    if inputs.media:
        prompt = engine.render_chat_with_media(
            inputs.messages, inputs.media, cancelled, **inputs.render_kwargs()
        )
        tokens, media = prompt.tokens, prompt.spans
    else:
        tokens = engine.render_chat(inputs.messages, **inputs.render_kwargs())
    mode: ReasoningFormat = (
        body.reasoning_format or request.app.state.server_settings.reasoning_format
    )
    # only a template that writes <think> can open it; only then is the text rendered again
    thinking_open = (
        mode != "none"
        and THINK_OPEN in engine.chat_template.source
        and opens_thinking(engine.chat_template.render(inputs.messages, **inputs.render_kwargs()))
    )
    asked = body.max_completion_tokens or body.asked_max_tokens()
    max_tokens = max_tokens_for(engine, len(tokens), asked, request)
    sampling = sampling_params(body, engine)
    if forced:
        sampling.grammar = tool_call_grammar(forced)
    else:
        sampling.grammar = response_format_grammar(body.response_format) or sampling.grammar
    if body.logprobs:
        sampling.logprobs = body.top_logprobs or 0
    return PreparedChat(
        tokens,
        max_tokens,
        seeded_samplings(sampling, body.n),
        body.stop_list(),
        tools is not None,
        body.logprobs,
        tool_names(tools),
        mode,
        thinking_open,
        body.parallel_tool_calls is False,
        media,
    )
