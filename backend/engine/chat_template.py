"""Render the GGUF's ``tokenizer.chat_template`` with Jinja2, as llama.cpp and HF do."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from backend.engine.errors import InvalidRequestError

# Used when a GGUF carries no template: ChatML, the most common format.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class ChatTemplate:
    def __init__(self, source: str | None, *, bos_token: str, eos_token: str) -> None:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        self.source = source or CHATML_TEMPLATE
        self._template = env.from_string(self.source)
        self.bos_token = bos_token
        self.eos_token = eos_token

    def render(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        tools: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        """The prompt text. ``continue_final_message`` leaves the last message open (an
        assistant prefill the model goes on with), as transformers and vLLM do: the text is
        cut right after that message's content, dropping the end-of-turn the template adds."""
        try:
            text = self._template.render(
                messages=messages,
                add_generation_prompt=add_generation_prompt and not continue_final_message,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=tools,
                **extra,
            )
        except TemplateError as exc:
            raise InvalidRequestError(
                f"the chat template rejected the messages: {exc}", param="messages"
            ) from None
        if continue_final_message and messages:
            text = _cut_after(text, str(messages[-1].get("content") or ""))
        return text


def _cut_after(text: str, final: str) -> str:
    """``text`` up to the end of the last occurrence of ``final`` (or of it stripped)."""
    for needle in (final, final.strip()):
        if needle and (at := text.rfind(needle)) >= 0:
            return text[: at + len(needle)]
    raise InvalidRequestError(
        "the final message cannot be continued: the chat template does not render its "
        "content as given",
        param="messages",
    )
