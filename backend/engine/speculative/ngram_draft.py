"""N-gram prompt lookup (llama-server's ``--spec-type ngram-simple``): the tokens that
followed the latest earlier occurrence of the sequence's last ``n`` tokens are the draft.

Output that repeats its input (an edited file given back, a quoted passage, code that
names the same identifiers) is drafted from the prompt; a model that repeats itself is
drafted from its own output. The index grows with the sequence, so one lookup costs a
dict access and one step's new tokens, not a scan of the whole context.
"""

from __future__ import annotations


class NgramIndex:
    """For one sequence: every ``n``-gram that has a token after it, mapped to where its
    latest such occurrence ends and how often it occurred.

    The last ``n`` tokens have no successor yet, so they are never in the index: a lookup
    of them finds only earlier occurrences.
    """

    __slots__ = ("_next_start", "_table", "n")

    def __init__(self, n: int) -> None:
        self.n = n
        self._table: dict[tuple[int, ...], tuple[int, int]] = {}
        self._next_start = 0  # first n-gram start not indexed yet

    def update(self, tokens: list[int]) -> None:
        """Index the n-grams that gained a successor since the last call (``tokens`` only
        grows between calls)."""
        n = self.n
        table = self._table
        stop = len(tokens) - n
        for start in range(self._next_start, stop):
            key = tuple(tokens[start : start + n])
            seen = table.get(key)
            table[key] = (start + n, seen[1] + 1 if seen else 1)
        self._next_start = max(self._next_start, stop)

    def draft(self, tokens: list[int], max_len: int, min_hits: int = 1) -> list[int]:
        """Up to ``max_len`` tokens that followed the latest earlier occurrence of the last
        ``n`` tokens, if that n-gram occurred at least ``min_hits`` times; else none."""
        if max_len <= 0 or len(tokens) <= self.n:
            return []
        self.update(tokens)
        hit = self._table.get(tuple(tokens[-self.n :]))
        if hit is None or hit[1] < min_hits:
            return []
        end = hit[0]
        return tokens[end : end + max_len]


class LongestMatch:
    """N-gram lookup with every length from ``n_max`` down to ``n_min``: the draft follows
    the longest n-gram ending the sequence that occurred before. After an edit (a renamed
    name in a file given back), drafting resumes ``n_min`` tokens later instead of
    ``n_max``; a short match is a weaker guess, which the draft policy weighs by the
    acceptance that matches of its length have had."""

    __slots__ = ("_indexes",)

    def __init__(self, n_max: int, n_min: int) -> None:
        self._indexes = [NgramIndex(n) for n in range(n_max, max(1, min(n_min, n_max)) - 1, -1)]

    def draft(self, tokens: list[int], max_len: int, min_hits: int = 1) -> tuple[list[int], int]:
        """(draft, length of the n-gram it followed); ([], 0) when no length matches."""
        for index in self._indexes:
            found = index.draft(tokens, max_len, min_hits)
            if found:
                return found, index.n
        return [], 0
