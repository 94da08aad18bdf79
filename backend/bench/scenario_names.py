"""The scenarios the load generator knows, and the comma list the CLIs accept.

``plain`` and ``shared-prefix`` are the throughput scenarios; the others measure one
feature each:

- ``follow-up``: multi-turn chat; each turn resends the conversation with the answer it got,
  so a server that keeps a conversation's cache prefills only the new message;
- ``edit``: a ~400-token code file comes back with one change, the case n-gram drafting
  (speculative decoding) is for;
- ``story``: a short prompt, a long free answer: speculation's no-repetition case.
"""

from __future__ import annotations

from backend.bench.errors import BenchError

PLAIN = "plain"
SHARED_PREFIX = "shared-prefix"
FOLLOW_UP = "follow-up"
EDIT = "edit"
STORY = "story"
EXTRA = (FOLLOW_UP, EDIT, STORY)
ALL = (PLAIN, SHARED_PREFIX, *EXTRA)
DEFAULT = (PLAIN, SHARED_PREFIX)
_ALIASES = {"prefix": SHARED_PREFIX, "followup": FOLLOW_UP, "all": ",".join(ALL)}


def parse_scenarios(text: str) -> tuple[str, ...]:
    """``"plain,prefix,follow-up"`` -> names in the order given, without repeats; ``all``
    stands for every scenario. Raises :class:`BenchError` for an unknown name."""
    expanded = ",".join(_ALIASES.get(p.strip(), p.strip()) for p in text.split(","))
    names = tuple(dict.fromkeys(p for p in expanded.split(",") if p))
    unknown = [n for n in names if n not in ALL]
    if unknown or not names:
        raise BenchError(
            f"unknown scenario(s) {unknown or [text]}; choose from {', '.join(ALL)} "
            "(or 'prefix', 'all')"
        )
    return names
