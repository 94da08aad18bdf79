"""Which model answers a request that names none (llama.vscode's /infill sends no
``model``; curl users often leave it out), in router mode:

1. exactly one model is loaded: that one, as a single-model server would answer;
2. else the first model preloaded with ``-m`` (``quantdesk serve -m a -m b``: ``a``),
   loaded again on demand if it was unloaded;
3. else a library of one model: that one;
4. else a 400 that lists the library's model names.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.router.errors import ModelRequiredError
from backend.router.model_pool import ModelPool


def model_for_unnamed_request(pool: ModelPool, preloaded: Sequence[str]) -> str:
    """The id of the model that answers a request without ``model`` (rules above)."""
    loaded = [e.model_id for e in pool.resident() if e.state == "loaded"]
    if len(loaded) == 1:
        return loaded[0]
    if preloaded:
        return preloaded[0]
    ids = pool.catalog.ids()
    if len(ids) == 1:
        return ids[0]
    where = f"{len(loaded)} models are loaded" if loaded else "no model is loaded"
    raise ModelRequiredError(
        f"the request names no model and {where}; name one in 'model': "
        f"{', '.join(sorted(ids, key=str.casefold)) or 'none'}"
    )
