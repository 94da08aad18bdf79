"""Names of the parts of a split GGUF (``<stem>-00001-of-00003.gguf`` ...): a model split
this way loads only with every part."""

from __future__ import annotations

import re

SPLIT_NAME = re.compile(r"^(?P<stem>.*)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def split_part_names(name: str) -> list[str]:
    """The file names of every part of the split GGUF ``name`` belongs to, in order;
    just ``[name]`` for a file that is not split."""
    match = SPLIT_NAME.match(name)
    if not match:
        return [name]
    count = int(match["count"])
    return [f"{match['stem']}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]
