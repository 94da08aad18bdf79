"""What the dashboard's RAM chart says about a server's memory, without Qt: the whole
server (a library server's router and its model servers) or one model's server."""

from __future__ import annotations

from typing import NamedTuple

from backend.core.units import human_bytes


class ServerMemory(NamedTuple):
    """Resident memory (RSS) of the server's processes, bytes."""

    total: int  # the server process and all its children
    main: int  # the server process alone (the router, for a library server)
    children: int  # how many processes run under it


def ram_series_name(model: str | None, memory: ServerMemory | None) -> str:
    """The name of the chart's server line: the filtered model's server, the router with
    the model servers under it, or a single server."""
    if model is not None:  # the filter above names it; a chart's legend has little room
        return "model RSS"
    if memory is not None:
        n = memory.children
        return f"router + {n} model{'s' if n != 1 else ''}"
    return "server RSS"


def ram_tooltip(
    model: str | None,
    memory: ServerMemory | None,
    rss_bytes: int,
    estimate_bytes: int | None = None,
) -> str:
    """The chart's tooltip: the numbers behind the server line, now."""
    if model is not None:
        text = f"{model}: {human_bytes(rss_bytes)} resident (its own server process)"
        if estimate_bytes:
            text += f"; the server admitted it with an estimate of {human_bytes(estimate_bytes)}"
        return text + "."
    if memory is not None:
        return (
            f"The whole server: {human_bytes(memory.total)} resident: the router "
            f"{human_bytes(memory.main)} and {memory.children} model server"
            f"{'s' if memory.children != 1 else ''} {human_bytes(memory.total - memory.main)}. "
            "Pick a model above for its own."
        )
    return f"The server process: {human_bytes(rss_bytes)} resident."
