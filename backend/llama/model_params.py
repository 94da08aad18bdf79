"""``llama_model_params`` for every model QuantDesk loads, with the CPU path decided once.

Every load (the served model, a router's children, the draft model, compare, the imatrix,
the probe aside) takes its params from :func:`model_params`, so that ``--no-repack``
(``QUANTDESK_NO_REPACK=1``) and the CPU probe's verdict apply everywhere alike.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass

import llama_cpp

from backend.llama.cpu_buffers import CpuPath, extra_buffer_names, path_name
from backend.llama.cpu_probe import ensure_verdict

log = logging.getLogger(__name__)

NO_REPACK_ENV = "QUANTDESK_NO_REPACK"


@dataclass(frozen=True)
class CpuPathChoice:
    """How this process loads weights on the CPU, and why."""

    use_extra_bufts: bool
    path: CpuPath
    reason: str
    extra_buffers: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "use_extra_bufts": self.use_extra_bufts,
            "extra_buffers": list(self.extra_buffers),
            "reason": self.reason,
        }


def no_repack_from_env() -> bool:
    return os.environ.get(NO_REPACK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


@functools.cache
def choose_cpu_path(no_repack: bool | None = None) -> CpuPathChoice:
    """The CPU path for this process's loads: off with ``no_repack`` (None: from
    ``QUANTDESK_NO_REPACK``), off where the CPU probe saw the repacked kernels fault, else
    llama.cpp's default (extra buffer types on)."""
    if no_repack is None:
        no_repack = no_repack_from_env()
    names = extra_buffer_names()
    if no_repack:
        return CpuPathChoice(False, "plain", "extra buffer types off (--no-repack)", names)
    if not names:
        return CpuPathChoice(True, "plain", "this build has no extra CPU buffer types", names)
    verdict = ensure_verdict()
    if not verdict.extra_bufts_safe:
        log.warning(
            "weight repacking is off on this machine: the CPU probe's %s with it on "
            "(extra buffers %s; verdict %s in QUANTDESK_HOME/cpu-probe); loads use "
            "use_extra_bufts=false",
            verdict.detail.removeprefix("probe "),
            ", ".join(names),
            verdict.key,
        )
        return CpuPathChoice(False, "plain", f"extra buffer types off: {verdict.detail}", names)
    return CpuPathChoice(
        True, path_name(True, names), f"extra buffer types on ({verdict.detail})", names
    )


def model_params(no_repack: bool | None = None) -> llama_cpp.llama_model_params:
    """llama.cpp's default model params with the CPU path of :func:`choose_cpu_path`."""
    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts = choose_cpu_path(no_repack).use_extra_bufts
    return params
