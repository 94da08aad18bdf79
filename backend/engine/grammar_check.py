"""Bounds on a GBNF grammar, checked before llama.cpp parses it.

llama.cpp's grammar parser recurses once per nested group, so a deep enough nesting
overflows the native stack and kills the process (no exception to catch). Large
grammars also cost the scheduler thread time on every sampled token, stalling every
other sequence. So a grammar, whether a client wrote it or we converted it from a JSON
schema, is scanned here first and refused with a 400 that names the limit it broke.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.engine.errors import InvalidRequestError

MAX_GRAMMAR_BYTES = 256 * 1024
# Nested groups: llama.cpp's parser uses a few native stack frames per level.
MAX_GRAMMAR_NESTING = 1024
# Alternatives ("|") in the whole grammar: each live one is a stack the sampler checks
# against the whole vocabulary for every token.
MAX_GRAMMAR_ALTERNATIVES = 1024
# Bounds of "x{m,n}": llama.cpp's own cap (beyond it, it silently drops the upper bound).
MAX_GRAMMAR_REPETITION = 2000


@dataclass(frozen=True)
class GrammarShape:
    """What the scan measured."""

    n_bytes: int
    nesting: int
    alternatives: int
    repetition: int


def measure_grammar(text: str) -> GrammarShape:
    """One pass over the grammar text, skipping literals, classes and comments."""
    depth = nesting = alternatives = repetition = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c in '"[<':
            i = _skip_quoted(text, i, {'"': '"', "[": "]", "<": ">"}[c])
        elif c == "(":
            depth += 1
            nesting = max(nesting, depth)
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == "|":
            alternatives += 1
        elif c == "{":
            end = text.find("}", i)
            if end < 0:
                break
            for part in text[i + 1 : end].split(","):
                if part.strip().isdigit():
                    repetition = max(repetition, int(part.strip()))
            i = end
        i += 1
    return GrammarShape(
        len(text.encode("utf-8", errors="surrogatepass")), nesting, alternatives, repetition
    )


def _skip_quoted(text: str, start: int, close: str) -> int:
    """Index of the character that closes the literal opened at ``start``."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == close:
            return i
        i += 1
    return len(text)


def check_grammar(text: str, *, param: str = "grammar") -> None:
    """Raise InvalidRequestError (a 400) unless the grammar is within every bound."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestError(
            "the grammar is not valid UTF-8 (it has a lone surrogate)", param=param
        ) from None
    shape = measure_grammar(text)
    for what, value, limit in (
        ("bytes", shape.n_bytes, MAX_GRAMMAR_BYTES),
        ("nested groups", shape.nesting, MAX_GRAMMAR_NESTING),
        ("alternatives", shape.alternatives, MAX_GRAMMAR_ALTERNATIVES),
        ("repetition count", shape.repetition, MAX_GRAMMAR_REPETITION),
    ):
        if value > limit:
            raise InvalidRequestError(
                f"the grammar is too large: {value} {what}, the limit is {limit}", param=param
            )
