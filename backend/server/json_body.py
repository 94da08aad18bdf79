"""Request bodies decoded as JSON, with every way that fails answered as a 400.

Python's JSON decoder recurses once per nested array or object and gives up with a
RecursionError at the interpreter's recursion limit: a body nested that deep (in any field,
known or not) is refused with that limit named, like the other bounds on a request.
"""

from __future__ import annotations

import json
from typing import Any

from backend.server.errors import ApiError, too_deep_message


def loads_body(raw: bytes) -> Any:
    """``raw`` as JSON; ApiError 400 when it is not valid JSON or nested too deep."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, too_deep_message(), code="invalid_request") from None
    except ValueError:  # JSONDecodeError, and UnicodeDecodeError on bytes that aren't text
        raise ApiError(400, "the request body is not valid JSON", code="invalid_request") from None
