"""How many draft tokens each sequence verifies this step: as many as pay for themselves.

A draft row costs decode time whether its token is accepted or not, and what a row costs
depends on the hardware and on the batch: one stream on a memory-bound GPU verifies 16 rows
nearly for the price of one, while 16 streams on a CPU are already compute-bound and every
extra row costs its full share. So the length is chosen per step, to maximise the step's
expected tokens per second:

- **cost**: :class:`DecodeCost`, the seconds of one ``llama_decode`` pass over ``r`` rows,
  measured once at start (:func:`calibrate`) and kept current from every step's decodes;
- **gain**: a draft token counts only if it and every token before it are accepted. With
  a sequence's acceptance rate ``p`` (:class:`Acceptance`, per sequence, starting from the
  rate all sequences have seen), token ``i`` of its draft is worth ``p**i`` expected tokens;
- **passes**: with a KV stream per slot, llama.cpp cuts a call into micro-batches of equal
  rows per slot, so every distinct draft length adds one pass over the weights. Lengths
  are therefore equalised: all drafting sequences verify the same ``k`` tokens, or their
  whole draft when it is shorter, whichever of the two costs less per expected token.

Without a draft (no n-gram match, no draft model) nothing is evaluated, so plain text pays
only the n-gram lookup.
"""

from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass

import llama_cpp

log = logging.getLogger(__name__)

# Row counts measured at start, and the lengths the policy considers besides the drafts' own.
CALIBRATION_ROWS = (1, 2, 4, 8, 16, 32)
CANDIDATE_LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
# Weight of a new measurement in a row count's running mean (FAST_DOWN: one faster than it).
COST_EMA = 0.1
FAST_DOWN = 0.5
# Acceptance: the rate a new sequence starts from counts as this many drafted tokens;
# a sequence's own evidence fades with this factor per verified or declined draft.
PRIOR_WEIGHT = 4.0
EVIDENCE_DECAY = 0.9


def first_rate(source: str) -> float:
    """Where a drafter's overall acceptance starts, before any of its drafts was verified
    (``source``: "model", or "ngram-N" for a match of N tokens). A long n-gram match is
    usually continued (0.89 with 12 tokens on the edit benchmark); a short one less often;
    the draft model stops at tokens it gives less than --draft-p-min (0.75)."""
    if source == "model":
        return 0.75
    n = int(source.rpartition("-")[2] or 0)
    return 0.8 if n >= 8 else 0.6


class DecodeCost:
    """Seconds of one decode pass over ``rows`` rows (logits on every row), interpolated
    linearly between measured row counts and extrapolated past the largest."""

    def __init__(self, points: dict[int, float]) -> None:
        if not points:
            raise ValueError("DecodeCost needs at least one measurement")
        self._rows: list[int] = sorted(points)
        self._secs: list[float] = [points[r] for r in self._rows]

    def seconds(self, rows: int) -> float:
        xs, ys = self._rows, self._secs
        if rows <= xs[0]:
            return ys[0] * rows / xs[0] if xs[0] > 1 else ys[0]
        i = bisect.bisect_left(xs, rows)
        if i < len(xs) and xs[i] == rows:
            return ys[i]
        if i == len(xs):  # past the largest: the slope of the last segment
            i -= 1
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (y1 - y0) * (rows - x0) / (x1 - x0)

    def observe(self, rows: int, seconds: float) -> None:
        """A decode pass of ``rows`` rows took ``seconds``: move that row count's figure
        towards it (a new row count becomes a point of its own). Another process can only
        make a decode slower, so a faster measurement counts at once for half, a slower one
        for a tenth and at most double. Larger row counts then never cost more than as many
        passes of this one as they hold: figures measured on a busy machine come down as
        soon as the rows the policy does use show what rows cost."""
        if rows <= 0 or seconds <= 0:
            return
        i = bisect.bisect_left(self._rows, rows)
        if i < len(self._rows) and self._rows[i] == rows:
            now = self._secs[i]
            weight = FAST_DOWN if seconds < now else COST_EMA
            self._secs[i] += weight * (min(seconds, now * 2) - now)
        elif len(self._rows) < 64:
            expected = self.seconds(rows)
            self._rows.insert(i, rows)
            self._secs.insert(i, min(max(seconds, expected / 2), expected * 2))
        else:
            return
        base = self._secs[i]
        for j in range(i + 1, len(self._rows)):
            bound = base * -(-self._rows[j] // rows)
            if self._secs[j] > bound:
                self._secs[j] = bound

    def of_call(self, rows: list[int], per_slot: bool) -> float:
        """Seconds of one call with ``rows[s]`` rows for sequence ``s``: one pass over all of
        them, or, with a stream per slot, one pass per distinct row count (llama.cpp's
        ``split_equal``), each over the rows every sequence still has at that level."""
        if not per_slot:
            return self.seconds(sum(rows))
        total = 0.0
        done = 0
        left = len(rows)
        for level in sorted(rows):
            if level > done:
                total += self.seconds(left * (level - done))
                done = level
            left -= 1
        return total


@dataclass
class Acceptance:
    """A drafter's record: how often a drafted token is accepted, given the ones before it
    were (a draft of ``k`` with ``j`` accepted is ``j`` hits and, if ``j < k``, one miss)."""

    hits: float = 0.0
    misses: float = 0.0

    def record(self, drafted: int, accepted: int, decay: float = 1.0) -> None:
        self.hits = self.hits * decay + accepted
        self.misses = self.misses * decay + (1 if accepted < drafted else 0)

    def fade(self, decay: float) -> None:
        """Evidence ages while the drafter offers drafts that the policy declines, so a
        sequence whose drafts once failed is tried again after a while."""
        self.hits *= decay
        self.misses *= decay

    def rate(self, prior: float, weight: float = PRIOR_WEIGHT) -> float:
        return (self.hits + prior * weight) / (self.hits + self.misses + weight)


@dataclass(frozen=True)
class Candidate:
    """One sequence's offer this step: the draft it has (``available`` tokens), the
    chance ``p`` that each is accepted, and the fewest tokens worth verifying."""

    available: int
    p: float
    n_min: int = 1


def expected_tokens(p: float, k: int) -> float:
    """Tokens a draft of ``k`` adds in expectation: p + p² + ... + p^k."""
    if k <= 0:
        return 0.0
    if p >= 1.0:
        return float(k)
    return p * (1.0 - p**k) / (1.0 - p)


def choose_lengths(
    candidates: list[Candidate],
    n_plain: int,
    cost: DecodeCost,
    *,
    per_slot: bool,
    draft_cost: DecodeCost | None = None,
) -> list[int]:
    """The draft length for each candidate (0: no draft) that maximises expected tokens per
    second of the decode call, which also holds ``n_plain`` sequences with one row each.
    ``draft_cost``: the drafts are still to be made by a draft model, one decode over the
    drafting sequences per token, so a length of ``k`` also costs ``k`` of those."""
    if not candidates:
        return []
    longest = max(c.available for c in candidates)
    ks = sorted({k for k in CANDIDATE_LENGTHS if k < longest} | {c.available for c in candidates})
    base_rows = [1] * (n_plain + len(candidates))
    best = [0] * len(candidates)
    best_rate = len(base_rows) / cost.of_call(base_rows, per_slot)
    for k in ks:
        for exact in (False, True):  # exact: only drafts of at least k, cut to k
            lengths = []
            for c in candidates:
                n = min(c.available, k)
                if n < c.n_min or (exact and c.available < k):
                    n = 0
                lengths.append(n)
            if not any(lengths):
                continue
            gain = sum(expected_tokens(c.p, n) for c, n in zip(candidates, lengths, strict=True))
            rows = [1] * n_plain + [1 + n for n in lengths]
            seconds = cost.of_call(rows, per_slot)
            if draft_cost is not None:
                seconds += max(lengths) * draft_cost.seconds(sum(1 for n in lengths if n))
            rate = (len(rows) + gain) / seconds
            if rate > best_rate:
                best_rate, best = rate, lengths
    return best


def consistent(points: dict[int, float]) -> None:
    """Make measured figures monotone (more rows never cheaper) and bounded by one-row
    decodes (``r`` rows never dearer than ``r`` decodes of one), in place."""
    rows = sorted(points)
    if not rows:
        return
    one = points[rows[0]] / rows[0]
    floor = 0.0
    for r in rows:
        points[r] = min(max(points[r], floor), one * r)
        floor = points[r]


def calibrate(
    ctx: object, memory: object, room: int, token: int, *, seq_id: int = 0, pos0: int = 0
) -> DecodeCost:
    """Time decodes of :data:`CALIBRATION_ROWS` rows (logits on every row, as a draft is
    verified) at positions ``pos0``... of sequence ``seq_id``, removing those cells after
    each (what the sequence holds before ``pos0`` stays); row counts of ``room`` or more
    are left out, and longer drafts are extrapolated. Every decode while serving corrects
    the figures. Each figure is the faster of two runs after one warm-up decode (on a
    shared machine the slower one measures the other processes; about 0.5 s in all for
    SmolLM2-135M on 2 CPU threads), and the figures are made consistent: more rows never
    cost less, and ``r`` rows never more than ``r`` decodes of one.

    The engine calibrates when a draft first needs a length chosen, on the drafting
    sequence's own cells (:meth:`Speculator.propose`), so that a server that never drafts
    never pays for it, and a draft model at start, on its idle context."""
    batch = llama_cpp.llama_batch_init(max(CALIBRATION_ROWS), 0, 1)
    points: dict[int, float] = {}
    try:
        plan = [(1, 1)] + [(rows, 2) for rows in CALIBRATION_ROWS if rows < room]
        for n, (rows, runs) in enumerate(plan):
            times = []
            for _ in range(runs):
                for i in range(rows):
                    batch.token[i] = token
                    batch.pos[i] = pos0 + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = seq_id
                    batch.logits[i] = 1
                batch.n_tokens = rows
                t = time.perf_counter()
                rc = llama_cpp.llama_decode(ctx, batch)
                times.append(time.perf_counter() - t)
                llama_cpp.llama_memory_seq_rm(memory, seq_id, pos0, -1)
                if rc != 0:
                    raise RuntimeError(f"llama_decode failed during calibration (code {rc})")
            if n:  # the first is the warm-up
                points[rows] = min(times)
    finally:
        llama_cpp.llama_batch_free(batch)
    consistent(points)
    log.info(
        "speculative decoding: decode cost by rows %s",
        ", ".join(f"{r}: {1000 * s:.2f} ms" for r, s in points.items()),
    )
    return DecodeCost(points)
