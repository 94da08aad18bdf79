"""The memory of the whole server the window started: the ``quantdesk serve`` process and
every process under it (a library server's model servers). Read with psutil in the stats
poller's thread; no server reports it, since the router counts no memory of its own."""

from __future__ import annotations

import logging

import psutil

from app.page_models.server_memory_view import ServerMemory

log = logging.getLogger(__name__)

# the router's pre-imported process that forks model servers (backend.router.server_forker)
ZYGOTE_MODULE = "backend.entrypoints.serve_zygote"
MODEL_SERVER_NAME = "quantdesk-serve"


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
    model_servers = 0
    for child in children:
        try:
            rss = int(child.memory_info().rss)
            # a forked model server keeps the fork server's argv but renames itself
            helper = (
                ZYGOTE_MODULE in " ".join(child.cmdline()) and child.name() != MODEL_SERVER_NAME
            )
        except psutil.Error:  # exited between the listing and the read
            continue
        total += rss
        if helper:  # the router's fork server: its memory is the router's, it serves no model
            main += rss
        else:
            model_servers += 1
    return ServerMemory(total, main, model_servers)
