"""``response_format`` and forced tool calls as GBNF grammars (llama.cpp grammar sampling)."""

from __future__ import annotations

import re
from typing import Any

from llama_cpp.llama_grammar import JSON_GBNF

from backend.server.errors import ApiError
from backend.server.json_schema_grammar import schema_to_gbnf


def schema_grammar(schema: dict[str, Any], *, param: str) -> str:
    """Bounded, strict-JSON grammar for ``schema`` (400 past the bounds)."""
    return schema_to_gbnf(schema, param=param)


def response_format_grammar(response_format: dict[str, Any] | None) -> str | None:
    """Grammar that makes every output parse (and validate, for json_schema)."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        schema = response_format.get("schema")
        return schema_grammar(schema, param="response_format") if schema else JSON_GBNF
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise ApiError(
                400,
                "response_format.json_schema.schema must be a JSON schema object",
                param="response_format",
            )
        return schema_grammar(schema, param="response_format")
    raise ApiError(400, f"unknown response_format type '{kind}'", param="response_format")


def rename_root(grammar: str, new_name: str) -> str:
    """Rename a grammar's ``root`` rule so it can be embedded in a larger grammar."""
    return re.sub(r"(?m)^root(\s*::=)", rf"{new_name}\1", grammar)
