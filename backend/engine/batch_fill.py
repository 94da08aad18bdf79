"""The rows of one ``llama_batch``: each planned sequence's tokens at their positions, and
where logits are read.

A prompt chunk asks for logits only at the prompt's last token (and on every row that
``prompt_logprobs`` scores); a generating sequence decodes its last token and, with
speculative decoding, the draft after it, with logits on every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import llama_cpp

from backend.engine.media.media_span import position_at
from backend.engine.sequence import Sequence


@dataclass
class FilledBatch:
    """What :func:`fill_batch` wrote: ``rows`` rows; for each sequence whose prompt or
    last token the batch completes, its row and the draft decoded after it
    (``logits_at``); the prompt rows to score (sequence, first row, rows); and how many
    rows are prompt tokens."""

    rows: int = 0
    logits_at: list[tuple[Sequence, int, list[int]]] = field(default_factory=list)
    scored: list[tuple[Sequence, int, int]] = field(default_factory=list)
    prompt_tokens: int = 0


def fill_batch(b: llama_cpp.llama_batch, plan: list[tuple[Sequence, int]]) -> FilledBatch:
    """Write ``plan`` (sequence, tokens to decode) into the ``llama_batch`` ``b``."""
    out = FilledBatch()
    i = 0
    for seq, n in plan:
        sid = seq.seq_id
        start = seq.n_past
        pos = position_at(seq.media, start)
        toks = seq.tokens
        assert start + n <= len(toks) or (n > 1 and seq.generating), "planned past the tokens"
        generating = n > 1 and seq.generating  # the last token and a draft: logits on each
        draft = seq.draft[: n - 1] if generating else []
        score = seq.request.prompt_logprobs is not None and start < seq.n_prompt - 1
        if generating:
            out.logits_at.append((seq, i, draft))
        elif score:
            out.scored.append((seq, i, min(n, seq.n_prompt - 1 - start)))
        row_logits = 1 if generating or score else 0
        for j, token in enumerate([toks[start], *draft] if generating else toks[start : start + n]):
            b.token[i] = token
            b.pos[i] = pos + j  # type: ignore[call-overload]  # the binding's type is wrong
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = sid
            b.logits[i] = row_logits
            i += 1
        if generating:
            continue
        if start + n == len(toks):
            b.logits[i - 1] = 1
            out.logits_at.append((seq, i - 1, []))
        if not seq.generating:
            out.prompt_tokens += n
    b.n_tokens = i
    out.rows = i
    return out
