"""The page registry: which pages the window shows, in what order, built how.

To add a page, put a ``PageSpec`` in :data:`PAGES`. A page module that does not
exist yet shows a "coming soon" state, and one that fails to build shows the
error, so the window always opens.

Two constructor styles are supported:
- ``Page(settings, parent=None)`` (``needs_context=False``): a self-contained page;
- ``Page(settings, context, parent=None)`` (``needs_context=True``): a page that
  uses the shared :class:`app.app_context.AppContext` (server, stats feed).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass

from PySide6.QtWidgets import QWidget

from app.app_context import AppContext
from app.storage.app_settings import AppSettings
from app.widgets.common import EmptyState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageSpec:
    key: str
    title: str
    icon: str
    module: str
    class_name: str
    blurb: str
    needs_context: bool = False


PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        "chat",
        "Chat",
        "chat",
        "app.pages.chat_page",
        "ChatPage",
        "Talk to the served model, with streaming replies.",
        needs_context=True,
    ),
    PageSpec(
        "models",
        "Models",
        "models",
        "app.pages.models_page",
        "ModelsPage",
        "Search the Hugging Face Hub, download GGUF files and manage your local library.",
    ),
    PageSpec(
        "server",
        "Server",
        "server",
        "app.pages.server_page",
        "ServerPage",
        "Serve a model over an OpenAI-compatible API.",
        needs_context=True,
    ),
    PageSpec(
        "dashboard",
        "Dashboard",
        "dashboard",
        "app.pages.dashboard_page",
        "DashboardPage",
        "Live throughput, latency, KV-cache and memory charts.",
        needs_context=True,
    ),
    PageSpec(
        "bench",
        "Bench",
        "bench",
        "app.pages.bench_page",
        "BenchPage",
        "Measure throughput and latency against concurrency.",
        needs_context=True,
    ),
    PageSpec(
        "quantize",
        "Quantise",
        "quantize",
        "app.pages.quantize_page",
        "QuantizePage",
        "Turn a model into smaller GGUF quantisations, optionally with an importance matrix.",
    ),
    PageSpec(
        "compare",
        "Compare",
        "compare",
        "app.pages.compare_page",
        "ComparePage",
        "Measure what quantisation costs: perplexity, KL divergence and side-by-side answers.",
    ),
)


class ComingSoonPage(EmptyState):
    """Shown for a page whose module has not been written yet."""

    def __init__(self, spec: PageSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec.icon, f"{spec.title} is coming soon", spec.blurb, parent=parent)


class BrokenPage(EmptyState):
    """Shown when a page raised while being built; the rest of the app keeps working."""

    def __init__(self, spec: PageSpec, error: BaseException, parent: QWidget | None = None) -> None:
        super().__init__(
            spec.icon,
            f"{spec.title} could not be opened",
            f"{type(error).__name__}: {error}\nThe log has the details.",
            parent=parent,
        )


def build_page(spec: PageSpec, settings: AppSettings, context: AppContext) -> QWidget:
    """Import and construct a page, or a placeholder that says why not."""
    try:
        module = importlib.import_module(spec.module)
    except ModuleNotFoundError as exc:
        if exc.name == spec.module:
            return ComingSoonPage(spec)
        log.exception("page %s failed to import", spec.key)
        return BrokenPage(spec, exc)
    except Exception as exc:
        log.exception("page %s failed to import", spec.key)
        return BrokenPage(spec, exc)
    try:
        cls = getattr(module, spec.class_name)
        page: QWidget = cls(settings, context) if spec.needs_context else cls(settings)
        return page
    except Exception as exc:
        log.exception("page %s failed to build", spec.key)
        return BrokenPage(spec, exc)
