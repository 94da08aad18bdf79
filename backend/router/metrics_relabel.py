"""Merge the children's Prometheus text into one exposition with a ``model`` label.

Each family's ``# HELP`` and ``# TYPE`` are written once, followed by the samples of every
model, as the text format requires of a family.
"""

from __future__ import annotations

import re

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?(\s.*)$")


def escape_label(value: str) -> str:
    """A Prometheus label value, escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labelled(line: str, model_id: str) -> str:
    match = _SAMPLE.match(line)
    if match is None:
        return line
    name, labels, rest = match.groups()
    inner = labels[1:-1] if labels else ""
    added = f'model="{escape_label(model_id)}"'
    return f"{name}{{{added}{',' + inner if inner else ''}}}{rest}"


def merge_metrics(by_model: dict[str, str]) -> str:
    """One exposition from ``{model id: its /metrics text}``."""
    families: dict[str, list[str]] = {}  # family -> its HELP/TYPE lines then samples
    headers_seen: set[tuple[str, str]] = set()
    for model_id, text in by_model.items():
        family = ""
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                kind, name = line.split()[1:3]
                family = name
                lines = families.setdefault(family, [])
                if (kind, family) not in headers_seen:
                    headers_seen.add((kind, family))
                    lines.insert(sum(1 for x in lines if x.startswith("# ")), line)
                continue
            if line.startswith("#"):
                continue
            families.setdefault(family, []).append(_labelled(line, model_id))
    return "".join(line + "\n" for lines in families.values() for line in lines)
