"""Context shift, as llama-server's ``--context-shift``: a generating sequence that fills
its context drops half of what follows its first ``n_keep`` tokens and goes on.

At the start of the step after its last token filled the context, the sequence's cells
``[n_keep, n_keep + n_discard)`` are removed and the ones after them moved back by
``n_discard`` positions (``llama_memory_seq_rm`` / ``seq_add``); its tokens lose the same
run. ``n_keep`` is the request's (-1: the whole prompt; plus the BOS token where the model
adds one; at most the context less 4), ``n_discard`` the request's or half the rest, as
llama-server computes them. The answer then says ``truncated``.

Only a sequence that holds its own KV stream shifts (the default, a stream per slot: with
one unified cache a shift would move cells other sequences share), with no images (an
image's positions are not one per cell), and only where the model's memory can shift.
What its cells hold after a shift is not what a fresh prefill of its tokens would give,
so the prefix cache keeps no more of it than its first ``n_keep`` tokens.
"""

from __future__ import annotations

from backend.engine.kv_cache import KvAccounting
from backend.engine.sequence import Sequence


def shift_sizes(
    n_past: int, n_prompt: int, n_ctx: int, *, n_keep: int, n_discard: int, add_bos: bool
) -> tuple[int, int]:
    """(tokens kept at the start, tokens dropped after them) for a sequence of ``n_past``
    decoded tokens; no tokens dropped means it cannot shift."""
    keep = n_prompt if n_keep < 0 else n_keep
    keep = min(n_ctx - 4, keep + (1 if add_bos else 0))
    left = n_past - keep
    drop = n_discard if n_discard > 0 else left // 2
    return keep, max(0, min(drop, left - 1))


def shift_context(seq: Sequence, kv: KvAccounting, n_ctx: int, *, add_bos: bool) -> bool:
    """Shift ``seq``'s context; False when nothing can be dropped."""
    sampling = seq.request.sampling
    keep, drop = shift_sizes(
        seq.n_past,
        seq.n_prompt,
        n_ctx,
        n_keep=sampling.n_keep,
        n_discard=sampling.n_discard,
        add_bos=add_bos,
    )
    if drop <= 0:
        return False
    kv.shift(seq.seq_id, keep, drop, seq.n_past)
    seq.tokens = seq.tokens[:keep] + seq.tokens[keep + drop :]  # a new list: drafters resync
    seq.n_past -= drop
    seq.prompt_array = seq.prompt_array[:keep]  # no longer a prefix source past here
    seq.shift_keep = keep if seq.shift_keep is None else min(seq.shift_keep, keep)
    seq.ngram = None
    seq.truncated = True
    return True
