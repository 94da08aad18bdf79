"""Deterministic prompts of the speculative-decoding scenarios: a code file to edit, a story.

The ``edit`` prompt holds a small, realistic Python module (a dataclass with methods) and asks
for it back with one method renamed, as an IDE's "apply edit" request does: the answer repeats
the input, which is where n-gram drafting helps. Every key gives other identifiers and another
first line, so no two requests share more than the instruction's few tokens and one
repetition's prompts are never cached for the next.
"""

from __future__ import annotations

import difflib
import random
from dataclasses import dataclass

# (class, item, items): the record kept, one entry, many entries.
_ENTITIES = (
    ("Player", "score", "scores"),
    ("Invoice", "payment", "payments"),
    ("Sensor", "reading", "readings"),
    ("Course", "grade", "grades"),
    ("Account", "deposit", "deposits"),
    ("Runner", "lap", "laps"),
    ("Warehouse", "shipment", "shipments"),
    ("Budget", "expense", "expenses"),
    ("Station", "sample", "samples"),
    ("Project", "estimate", "estimates"),
)
_ADJECTIVES = ("regional", "nightly", "internal", "legacy", "shared", "public", "local", "main")
_SERVICES = ("billing", "reporting", "tracking", "archive", "analytics", "planning", "audit")

# Methods, in file order; {i}/{s}: the item / items noun. Each is 40-70 SmolLM2 tokens.
_METHODS = (
    '''    def add_{i}(self, value: float) -> None:
        """Record one {i}; negative values are rejected."""
        if value < 0:
            raise ValueError(f"negative {i}: {{value}}")
        self.{s}.append(value)
''',
    '''    def total_{s}(self) -> float:
        """The sum of every recorded {i}."""
        return sum(self.{s})
''',
    '''    def average_{i}(self) -> float:
        """The mean {i}, or 0.0 when nothing was recorded."""
        if not self.{s}:
            return 0.0
        return self.total_{s}() / len(self.{s})
''',
    '''    def largest_{i}(self) -> float | None:
        """The largest {i} so far, if any."""
        return max(self.{s}, default=None)
''',
    '''    def over_limit(self) -> bool:
        """True once the total passes the configured limit."""
        return self.total_{s}() > self.limit
''',
    '''    def remove_{i}(self, index: int) -> float:
        """Drop the {i} at ``index`` and return it."""
        if not 0 <= index < len(self.{s}):
            raise IndexError(f"no {i} at {{index}}")
        return self.{s}.pop(index)
''',
    '''    def scaled_{s}(self, factor: float) -> list[float]:
        """Every {i} multiplied by ``factor``, rounded to two places."""
        return [round(value * factor, 2) for value in self.{s}]
''',
    '''    def summary(self) -> str:
        """One line for logs: name, count, total and average."""
        count = len(self.{s})
        return (
            f"{{self.name}}: {{count}} {s}, total {{self.total_{s}():.2f}}, "
            f"average {{self.average_{i}():.2f}}"
        )
''',
    '''    def reset(self) -> list[float]:
        """Forget every {i}; return what was recorded."""
        old, self.{s} = self.{s}, []
        return old
''',
)
_CHARS_PER_TOKEN = 3.85
"""SmolLM2's tokenizer spends about one token per 3.85 characters of this code."""


@dataclass(frozen=True)
class EditTask:
    """A code file and the one change asked for."""

    code: str
    old_name: str
    new_name: str

    @property
    def expected(self) -> str:
        """The file as it should come back."""
        return self.code.replace(self.old_name, self.new_name)


def code_file(n_tokens: int, key: str) -> EditTask:
    """A Python module of about ``n_tokens`` tokens for ``key``; the change renames the
    ``total_*`` method, which other methods call."""
    rng = random.Random(f"edit:{key}")
    cls, item, items = rng.choice(_ENTITIES)
    revision = rng.randint(100, 999)
    head = (
        f'"""{cls} records for the {rng.choice(_ADJECTIVES)} {rng.choice(_SERVICES)} service '
        f'(revision {revision})."""\n\n'
        "from __future__ import annotations\n\n"
        "from dataclasses import dataclass, field\n\n"
        f"DEFAULT_LIMIT = {rng.randint(10, 99) * 50}.0\n\n\n"
        "@dataclass\n"
        f"class {cls}:\n"
        f'    """One {cls.lower()} and the {items} recorded for it."""\n\n'
        "    name: str\n"
        f"    {items}: list[float] = field(default_factory=list)\n"
        "    limit: float = DEFAULT_LIMIT\n"
    )
    body = head
    for template in _METHODS:
        method = "\n" + template.format(i=item, s=items)
        if (len(body) + len(method) / 2) / _CHARS_PER_TOKEN > n_tokens:
            break  # the file ends nearer the target without this method
        body += method
    old = f"total_{items}"
    new = rng.choice(("sum_of", "combined", "overall")) + f"_{items}"
    return EditTask(body, old, new)


def edit_prompt(task: EditTask) -> str:
    """The request: the whole file back, with one method renamed."""
    return (
        "Here is a Python file:\n\n"
        f"```python\n{task.code}```\n\n"
        f"Rename the method `{task.old_name}` to `{task.new_name}`, including every call to "
        "it. Change nothing else. Reply with the complete updated file in one Python code "
        "block and nothing else."
    )


_HEROES = (
    "a lighthouse keeper",
    "a young baker",
    "an old fisherman",
    "a curious robot",
    "a retired pilot",
    "a shy librarian",
    "a travelling musician",
    "a stubborn goat",
    "a night-shift nurse",
    "a clockmaker's apprentice",
)
_PLACES = (
    "a snowy mountain village",
    "a busy harbour town",
    "an abandoned space station",
    "a desert market",
    "a flooded city",
    "a quiet island",
    "a forest at the edge of the map",
    "a train crossing the steppe",
)
_TWISTS = (
    "finds a letter addressed to someone who died a century ago",
    "has to keep a promise made to a stranger",
    "loses the one thing they never let out of sight",
    "discovers that the town's oldest rule was a mistake",
    "is asked to guard a door that has no key",
    "hears a song that nobody else can hear",
)


def story_prompt(key: str) -> str:
    """A short request for a story: the output repeats nothing of the prompt."""
    rng = random.Random(f"story:{key}")
    return (
        f"Write a short story about {rng.choice(_HEROES)} in {rng.choice(_PLACES)} who "
        f"{rng.choice(_TWISTS)}. Story {rng.randint(1, 9999)}."
    )


def edit_answer_similarity(task: EditTask, answer: str, block_open: bool) -> float:
    """Share of the expected file's lines that ``answer`` has, in order (difflib's ratio over
    lines; 1.0 is the file exactly). The code is read from the answer's first code block;
    ``block_open``: the prompt already opened it, so the answer starts with code."""
    code = answer
    if not block_open:
        start = answer.find("```")
        code = answer[answer.find("\n", start) + 1 :] if start >= 0 else answer
    code = code.split("```", 1)[0]
    expected = task.expected.splitlines()
    matcher = difflib.SequenceMatcher(None, expected, code.splitlines(), autojunk=False)
    return matcher.ratio()
