"""The session cache's RAM budget (``--cache-ram``): what the engine keeps, and what the fit
estimate and the router's memory budget count for it."""

from __future__ import annotations

import psutil

MIB = 1 << 20


def default_session_ram_mib() -> int:
    """``--cache-ram`` when not given: the smaller of 8 GiB (llama-server's default) and a
    tenth of the RAM available now, so that a small machine keeps room for the model."""
    available = psutil.virtual_memory().available // MIB
    return int(min(8192, available // 10))


def session_ram_mib(cache_ram: int | None) -> int:
    """The budget ``--cache-ram`` sets, in MiB (None: the default, 0: off)."""
    return default_session_ram_mib() if cache_ram is None else cache_ram
