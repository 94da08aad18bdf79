"""Which model answers a request that names none (llama.vscode's /infill sends no
``model``; curl users often leave it out), in router mode:

1. exactly one model is loaded: that one, as a single-model server would answer;
2. else the first model preloaded with ``-m`` (``quantdesk serve -m a -m b``: ``a``),
   loaded again on demand if it was unloaded;
3. else a library of one model: that one;
4. else a 400 that lists the library's model names.

Under /v1/messages a name that no library model has (Claude Code sends ``claude-...`` names
for its main and its small, fast model) is treated as no name, by the same rules; anywhere
else it stays a 404.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from backend.router.errors import ModelRequiredError, UnknownModelError
from backend.router.model_pool import ModelPool

log = logging.getLogger(__name__)


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


async def model_for_messages(
    pool: ModelPool, preloaded: Sequence[str], model: str, told: set[str]
) -> str:
    """The id of the model that answers a /v1/messages request naming ``model``: that
    library model, else the one an unnamed request gets (said in the log once per name:
    ``told`` holds the names said), else the 404 that lists the library."""
    try:
        return (await pool.find(model)).model_id
    except UnknownModelError as unknown:
        try:
            chosen = model_for_unnamed_request(pool, preloaded)
        except ModelRequiredError:
            raise unknown from None
        if model not in told:
            told.add(model)
            log.info(
                "/v1/messages: no library model is named '%s'; answering it as a request "
                "without a model (now: %s)",
                model,
                chosen,
            )
        return chosen
