"""The session store an engine gets from its settings (``--cache-ram``, ``--cache-disk``)."""

from __future__ import annotations

import logging

import llama_cpp

from backend.engine.model_runtime import ModelRuntime
from backend.engine.session_cache import MIB, SessionStore, StateIo
from backend.engine.session_disk_store import FOLDER, DiskStore, default_disk_budget_mib
from backend.engine.session_key import session_key
from backend.settings.cache_budgets import session_ram_mib
from backend.settings.paths import subdir

log = logging.getLogger(__name__)


def cannot_cut(runtime: ModelRuntime) -> bool:
    """Recurrent and hybrid models keep a state that cannot be cut back to a prefix."""
    model = runtime.model
    return bool(llama_cpp.llama_model_is_recurrent(model)) or bool(
        llama_cpp.llama_model_is_hybrid(model)
    )


def session_store_for(runtime: ModelRuntime, kv: StateIo) -> SessionStore | None:
    """The store ``runtime``'s settings ask for, or None when both tiers are off (or the
    model cannot use one)."""
    s = runtime.settings
    if not runtime.can_generate or cannot_cut(runtime):
        return None
    ram_mib = session_ram_mib(s.cache_ram)
    disk_mib = s.cache_disk
    disk = None
    if disk_mib != 0:
        try:
            root = subdir(FOLDER)
            if disk_mib is None:
                disk_mib = default_disk_budget_mib(root)
            if disk_mib > 0:
                disk = DiskStore(root, session_key(runtime), disk_mib * MIB)
        except OSError as exc:
            log.warning("session cache on disk is off: %s", exc)
            disk = None
    if ram_mib <= 0 and disk is None:
        return None
    swa = int(llama_cpp.llama_model_n_swa(runtime.model)) > 0
    log.info(
        "session cache: %d MiB of RAM, %s on disk%s",
        ram_mib,
        f"{disk.budget_bytes // MIB} MiB" if disk is not None else "none",
        " (sliding-window model: whole entries only)" if swa else "",
    )
    return SessionStore(kv, ram_budget_bytes=ram_mib * MIB, disk=disk, swa=swa)
