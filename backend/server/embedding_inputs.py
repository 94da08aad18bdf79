"""The bodies of the embeddings routes and their prompts, in every shape llama-server takes
(its ``tokenize_input_prompts`` and ``handle_embeddings_impl``), tokenised as it tokenises
them.

The prompt is ``input`` (OpenAI's name; on /v1/embeddings the answer is OpenAI's) or
``content`` (llama-server's native name: the answer is its bare list, on every route). It is:

- one prompt: a string; token ids, possibly mixed with strings (``[12, 34, "text", 56]``);
  ``{"prompt_string": ...}`` (llama-server's prompt object; ``multimodal_data`` is refused:
  embeddings take text only here); or ``{"content": [{"type": "text", "text": ...}, ...]}``
  (OpenAI content parts, their texts joined);
- or a list of such prompts, one embedding each. A list with a token id at its top level
  is one prompt, as llama-server reads it: ``["a", "b"]`` is two prompts, ``["a", 5]`` one.

A string gets the model's special tokens (BOS, and EOS or SEP where its tokenizer adds
them), and special-token text in it is parsed; in a mixed prompt only a string that comes
first gets them; token ids are taken as they are.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic_core import PydanticCustomError

from backend.engine.engine import Engine
from backend.server.errors import ApiError
from backend.server.routes.tokenize import ensure_utf8

MixedPrompt = list[int | str]


class PromptObject(BaseModel):
    """llama-server's prompt object: the text (or ids and text), and images or audio as
    base64 (not embedded here)."""

    model_config = ConfigDict(extra="allow")

    prompt_string: str | MixedPrompt
    multimodal_data: list[str] = Field(default_factory=list, max_length=1000)


class ContentPart(BaseModel):
    """An OpenAI content part; only text parts are embedded here."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ContentObject(BaseModel):
    """``{"content": [parts]}``: one prompt, the texts of its parts joined."""

    model_config = ConfigDict(extra="allow")

    content: list[ContentPart]


Subprompt = str | MixedPrompt | PromptObject | ContentObject
Prompts = (
    str
    | PromptObject
    | ContentObject
    | list[int | str | MixedPrompt | PromptObject | ContentObject]
)

SHAPE_ERROR = (
    "must be a string, token ids (possibly mixed with strings), a prompt object "
    '({"prompt_string": ...}), OpenAI content parts ({"content": [{"type": "text", '
    '"text": ...}]}), or a list of these'
)
PROMPTS_HELP = (
    "A string, token ids (mixed with strings or not), a prompt object, or a list of these "
    "(one embedding each; a list with a token id at its top level is one prompt)"
)


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request, with llama-server's ``content`` and ``embd_normalize``;
    unknown fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    input: Prompts | None = Field(None, description=PROMPTS_HELP)
    content: Prompts | None = Field(
        None, description=f"llama-server's name for input (its bare list answers). {PROMPTS_HELP}"
    )
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, description="Must equal the model's dimension")
    embd_normalize: int = Field(
        2,
        ge=-1,
        le=2**31 - 1,
        description=(
            "How pooled vectors are scaled, as llama-server's: -1 not at all, 0 to the int16 "
            "range by their largest magnitude, 1 taxicab, 2 Euclidean (unit length), p > 2 "
            "the p-norm; ignored with pooling none"
        ),
    )
    user: str | None = None

    @field_validator("input", "content", mode="wrap")
    @classmethod
    def _one_message_for_a_bad_shape(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """One message that lists the shapes, not the first of the union's complaints."""
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("prompt_shape", SHAPE_ERROR) from None

    @property
    def native(self) -> bool:
        """Whether the prompt came as ``content`` (and not ``input``): llama-server then
        answers its bare list, on /v1/embeddings too."""
        return "input" not in self.model_fields_set

    def prompts(self) -> Prompts:
        """``input``, else ``content``; a 400 when neither is given (or input is null)."""
        if self.input is not None:
            return self.input
        if "input" in self.model_fields_set:
            raise ApiError(400, f"input {SHAPE_ERROR}, not null", param="input")
        if self.content is None:
            raise ApiError(400, '"input" or "content" must be provided', param="input")
        return self.content


def split_prompts(prompts: Prompts) -> tuple[list[Subprompt], bool]:
    """The prompts one request holds, by llama-server's rule (module docstring), and
    whether they came as a list of prompts (a batch, even of one)."""
    if isinstance(prompts, list) and not any(isinstance(p, int) for p in prompts):
        return list(prompts), True  # type: ignore[arg-type]  # no top-level id: each a prompt
    return [prompts], False  # type: ignore[list-item]  # a top-level id: ids and text of one


def _refusal(where: str, message: str) -> ApiError:
    """A 400 that names the item (``input[2].content[0]``) and, as ``param``, the field."""
    return ApiError(400, f"{where}: {message}", param=re.split(r"[\[.]", where, maxsplit=1)[0])


def prompt_tokens(engine: Engine, prompt: Subprompt | list[object], where: str) -> list[int]:
    """One prompt's tokens, as llama-server tokenises it (module docstring); ``where`` names
    it in errors (``input``, ``input[2]``)."""
    if isinstance(prompt, str):
        return engine.tokenize(ensure_utf8(prompt, where), add_special=True, parse_special=True)
    if isinstance(prompt, PromptObject):
        if prompt.multimodal_data:
            raise _refusal(f"{where}.multimodal_data", "embeddings take text only here")
        return prompt_tokens(engine, prompt.prompt_string, f"{where}.prompt_string")
    if isinstance(prompt, ContentObject):
        texts: list[str] = []
        for i, part in enumerate(prompt.content):
            if part.type != "text":
                raise _refusal(
                    f"{where}.content[{i}]",
                    f"embeddings take text parts only here, not {part.type!r}",
                )
            texts.append(part.text or "")
        return prompt_tokens(engine, "".join(texts), f"{where}.content")
    tokens: list[int] = []
    for i, piece in enumerate(prompt):
        if isinstance(piece, str):  # the model's special tokens for a first string only
            text = ensure_utf8(piece, f"{where}[{i}]")
            tokens += engine.tokenize(text, add_special=i == 0, parse_special=True)
        elif isinstance(piece, int):
            tokens.append(piece)
        else:
            raise _refusal(
                f"{where}[{i}]", "a prompt that holds token ids holds only ids and strings"
            )
    vocab = engine.runtime.n_vocab
    if any(not 0 <= t < vocab for t in tokens):
        raise _refusal(where, f"token ids must be in 0..{vocab - 1}")
    if not tokens:
        raise _refusal(where, "no tokens: input content cannot be empty")
    return tokens
