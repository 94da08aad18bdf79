"""The memory of the whole server the window started: the ``quantdesk serve`` process and
every process under it (a library server's model servers). Read with psutil in the stats
poller's thread; no server reports it, since the router counts no memory of its own."""

from __future__ import annotations

import logging

import psutil

from app.page_models.server_memory_view import ServerMemory

log = logging.getLogger(__name__)


def server_memory(pid: int) -> ServerMemory | None:
    """The RSS of ``pid`` and its children, added up (pages two processes share count in
    each, as the per-model figures do); ``None`` once ``pid`` is gone."""
    try:
        root = psutil.Process(pid)
        main = int(root.memory_info().rss)
        children = root.children(recursive=True)
    except psutil.Error as exc:
        log.debug("cannot read the server's memory: %s", exc)
        return None
    total = main
    for child in children:
        try:
            total += int(child.memory_info().rss)
        except psutil.Error:  # exited between the listing and the read
            continue
    return ServerMemory(total, main, len(children))
