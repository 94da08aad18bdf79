"""The Server page's speculative-decoding choice without Qt: the three choices an LM Studio
user knows (off, n-gram prompt lookup, a draft model) and the ``serve`` knobs each sets.

The knobs are :class:`~backend.settings.engine_settings.SpeculativeKnobs`, ``serve``'s own;
this module only maps the page's one combo onto ``spec_type`` and ``model_draft``. The
knobs always say what runs: with the choice off no draft model is passed (a draft model
alone would turn ``draft-simple`` on), and the page remembers the picked draft itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from backend.settings.engine_settings import SpeculativeKnobs

SpecMode = Literal["off", "ngram", "draft"]


@dataclass(frozen=True)
class SpecChoice:
    mode: SpecMode
    label: str
    tooltip: str


SPEC_CHOICES: tuple[SpecChoice, ...] = (
    SpecChoice("off", "off", "The served model generates every token itself"),
    SpecChoice(
        "ngram",
        "n-gram (prompt lookup)",
        "Drafts the tokens that followed the latest tokens earlier in the conversation: "
        "helps when the answer repeats the prompt (code edits, quoting); no extra memory",
    ),
    SpecChoice(
        "draft",
        "draft model",
        "A small model drafts tokens for the served model to verify; it must share the "
        "served model's vocabulary (e.g. a smaller model of the same family)",
    ),
)
DRAFT_TOKENS_TIP = (
    "Most tokens the draft model guesses ahead per step; more pays off when it is often "
    "right, 0 turns drafting off"
)
DRAFT_MODEL_TIP = (
    "The draft model: must use the same tokenizer as the served model, or the server "
    "refuses to start"
)


def spec_mode(knobs: SpeculativeKnobs) -> SpecMode:
    """The page's choice for ``knobs``: a draft model wins over n-grams (with both, the
    model drafts when the n-grams find nothing)."""
    types = knobs.spec_types
    if "draft-simple" in types:
        return "draft"
    if "ngram-simple" in types:
        return "ngram"
    return "off"


def spec_update(knobs: SpeculativeKnobs, mode: SpecMode, draft_model: str) -> dict[str, Any]:
    """The ``spec_type`` and ``model_draft`` values for ``mode``; ``draft_model`` is the
    picked draft (a path or 'default'). A saved type list that already drafts with a model
    (``ngram-simple,draft-simple``, written by hand) is kept while the choice stays 'draft'."""
    if mode == "off":
        return {"spec_type": "none", "model_draft": None}
    if mode == "ngram":
        return {"spec_type": "ngram-simple", "model_draft": None}
    kept = "draft-simple" in knobs.spec_type.split(",")
    return {"spec_type": knobs.spec_type if kept else "draft-simple", "model_draft": draft_model}
