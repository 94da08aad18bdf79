"""The responses kept for ``GET /v1/responses/{id}`` and ``previous_response_id``.

They live in this server process's memory only, never on disk, and go when it stops. The
store is bounded in bytes: each response counts the JSON size of its whole conversation
(earlier turns included, as ``previous_response_id`` needs them) and of itself, and the
oldest are dropped first once the bound is passed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredResponse:
    """A finished response and the conversation it ended: the input items of every turn
    up to it (instructions excluded: they never carry over) followed by its output items."""

    response: dict[str, Any]
    conversation: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0


class ResponseStore:
    """A bounded, thread-safe map from response id to :class:`StoredResponse`, oldest
    dropped first."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    def put(self, response: dict[str, Any], conversation: list[dict[str, Any]]) -> bool:
        """Keep ``response``; False when it alone is bigger than the whole store."""
        size = len(json.dumps(response)) + len(json.dumps(conversation))
        if size > self._max_bytes:
            log.warning(
                "response %s not stored: %d bytes, the store holds %d",
                response["id"],
                size,
                self._max_bytes,
            )
            return False
        with self._lock:
            self._drop(response["id"])
            self._items[response["id"]] = StoredResponse(response, conversation, size)
            self._bytes += size
            while self._bytes > self._max_bytes:
                self._drop(next(iter(self._items)))
        return True

    def get(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            return self._items.get(response_id)

    def delete(self, response_id: str) -> bool:
        with self._lock:
            return self._drop(response_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def _drop(self, response_id: str) -> bool:
        old = self._items.pop(response_id, None)
        if old is None:
            return False
        self._bytes -= old.size
        return True
