"""What one scheduler step decodes: a pure function of the running sequences.

Every step decodes one token for each generating sequence, then prompt chunks of admitted
sequences up to ``n_batch`` (chunked prefill), then, with speculative decoding, the drafts
of generating sequences in the budget left (a draft is a guess: it never delays another
sequence's token or a prompt, and is cut short rather than exceed ``n_batch``). A chunk that
ends a prompt reads its logits in the same step, so a sequence's first token never waits for
a later (possibly prefill-heavy) step. An image in a prompt is decoded whole, from its
embeddings, in a call of its own (after the others); text chunks stop where an image starts.
A prefill that requests are waiting on stops at the end of the prefix they share
(``branch_at``, set by admission): they join in the next step, and every prompt in it has
only its own suffix left.

With a KV stream per slot, llama.cpp cuts a batch into micro-batches of equal tokens per
slot over runs of consecutive slot ids, and its CPU flash attention only takes the fast
tiled kernel with at least ``FA_TILE`` query rows per slot. A decode row next to a new
prompt would cut the prompt to 1 + (n - 1) rows, and a short chunk would cut its long
neighbours down to its own length. So decode rows and short chunks share one call, each long
prompt chunk gets a call of its own (shortest first: a prompt that ends in it hands out its
first token before the next call starts, rather than when the whole step is done), and only
the step's first prompt may start a short chunk just to use up the budget. Draft rows go
with the decode rows: llama.cpp then cuts that call into micro-batches of the rows every
slot still has, so drafts of unequal length cost a pass over the weights per distinct
length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.engine.media.media_span import next_span_start, span_at
from backend.engine.sequence import Sequence

# ggml's CPU flash attention runs its fast tiled kernel from this many query rows per KV stream.
FA_TILE = 64


@dataclass
class StepPlan:
    """The batches of one step's ``llama_decode`` calls, in order: (sequence, tokens)."""

    calls: list[list[tuple[Sequence, int]]] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return sum(n for call in self.calls for _, n in call)


def plan_step(
    running: list[Sequence], *, n_batch: int, per_slot: bool, fa_tile: int = FA_TILE
) -> StepPlan:
    """Tokens to decode this step, per sequence, as the batches of its ``llama_decode``
    calls (more than one only with ``per_slot``, see the module docstring)."""
    decode: list[tuple[Sequence, int]] = []
    prompt: list[tuple[Sequence, int]] = []
    budget = n_batch
    for seq in running:
        if seq.remaining == 1 and budget > 0:
            decode.append((seq, 1))
            budget -= 1
    images: list[tuple[Sequence, int]] = []
    for seq in running:
        if seq.remaining > 1 and budget > 0:
            want = seq.remaining
            if seq.media:
                span = span_at(seq.media, seq.n_past)
                if span is not None:  # a whole image, in a call of its own, or next step
                    if span.n_tokens <= budget:
                        images.append((seq, span.n_tokens))
                        budget -= span.n_tokens
                    continue
                if (start := next_span_start(seq.media, seq.n_past)) is not None:
                    want = min(want, start - seq.n_past)  # the text up to the next image
            if seq.n_past < seq.branch_at:
                want = min(want, seq.branch_at - seq.n_past)
            chunk = min(want, budget)
            if per_slot and prompt and chunk < min(want, fa_tile):
                continue  # next step, in one piece (the first prompt always goes)
            prompt.append((seq, chunk))
            budget -= chunk
    drafted: list[tuple[Sequence, int]] = []
    if budget > 0 and any(seq.draft for seq, _ in decode):
        decode, drafted = _with_drafts(decode, budget)
    if not per_slot:
        # drafted rows last: the cells of rejected draft tokens are then the last ones
        # written, and the next step's tokens of the other sequences that fill them still
        # come after those sequences' earlier cells
        calls = decode + prompt + drafted
        return StepPlan(([calls] if calls else []) + [[item] for item in images])
    decode += drafted
    rest = sorted(
        decode + [item for item in prompt if item[1] < fa_tile], key=lambda item: item[0].seq_id
    )
    # shortest first: each prompt's first token goes out after its own call
    long = sorted((item for item in prompt if item[1] >= fa_tile), key=lambda item: item[1])
    return StepPlan(([rest] if rest else []) + [[item] for item in long + images])


def _with_drafts(
    decode: list[tuple[Sequence, int]], budget: int
) -> tuple[list[tuple[Sequence, int]], list[tuple[Sequence, int]]]:
    """Split the decode rows into those without a draft and those with one, each draft
    after its sequence's token and cut short where the budget ends."""
    plain: list[tuple[Sequence, int]] = []
    drafted: list[tuple[Sequence, int]] = []
    for seq, rows in decode:
        extra = min(len(seq.draft), budget)
        budget -= extra
        (drafted if extra else plain).append((seq, rows + extra))
    return plain, drafted
