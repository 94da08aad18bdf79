"""JSON schema -> GBNF, bounded and strict.

The conversion is llama-cpp-python's ``SchemaConverter`` (a port of llama.cpp's
``json_schema_to_grammar``), with two changes:

- **Bounds first.** A schema is walked before it is converted, and refused with a 400
  that names the limit when it is too deep, too large, has too many enum values, or has
  a length/item bound past :data:`MAX_SCHEMA_REPETITION`. The converter writes
  ``maxItems: N`` as N nested groups, and llama.cpp's parser recurses once per group:
  ``maxItems: 1000000`` overflowed the native stack and killed the server.
- **Integers keep their bounds.** ``minimum``/``maximum`` (and the exclusive ones) on an
  integer become a digit-by-digit range (the converter ignored them).
- **Backslashes in literals are escaped.** The port escapes ``"`` and newlines in a
  ``const``/``enum`` literal but not ``\\``, so ``{"const": "a\\"b"}`` (a tool named
  ``a"b``) became a different grammar (llama.cpp's own converter escapes it).
- **Strings are valid JSON strings.** The converter's ``char`` rule allows any character
  but ``"`` and ``\\``, so raw control characters (U+0000-U+001F) could appear inside
  strings and ``json.loads(strict=True)`` (the SDKs' ``parse``) rejected the answer. Here
  ``char`` and the pattern ``dot`` exclude them and allow only JSON's escapes.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from llama_cpp.llama_grammar import RESERVED_NAMES, BuiltinRule, SchemaConverter

from backend.engine.errors import InvalidRequestError
from backend.server.integer_range_grammar import integer_range_rule

MAX_SCHEMA_BYTES = 64 * 1024
MAX_SCHEMA_DEPTH = 32
# Each enum value is a grammar alternative that every sampled token is checked against
# (1,000 values sharing a prefix cost 0.6 s per token on 2 cores, stalling every stream).
MAX_ENUM_VALUES = 256
# minLength/maxLength, minItems/maxItems, min/maxProperties and {m,n} in patterns.
MAX_SCHEMA_REPETITION = 1000

_BOUND_KEYS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)
_QUANTIFIER = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")

# A JSON string character: anything but '"', '\' and control characters, or an escape.
STRICT_CHAR = (
    r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] '
    r"[0-9a-fA-F])"
)
_STRICT_DOT = r'[^"\\\x7F\x00-\x1F]'


_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}
_LITERAL_ESCAPE = re.compile(r'[\r\n"\\]')


class _StrictConverter(SchemaConverter):  # type: ignore[misc]
    def _format_literal(self, literal: str) -> str:
        return '"' + _LITERAL_ESCAPE.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], literal) + '"'

    def _add_primitive(self, name: str, rule: BuiltinRule) -> str:
        if name == "char":
            rule = BuiltinRule(STRICT_CHAR, [])
        return str(super()._add_primitive(name, rule))

    def visit(self, schema: dict[str, Any], name: str) -> str:
        if schema.get("type") == "integer" and any(k in schema for k in _INT_BOUNDS):
            rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
            try:
                rule = integer_range_rule(*_integer_bounds(schema))
            except ValueError as exc:
                raise InvalidRequestError(f"the JSON schema is empty: {exc}") from None
            return str(self._add_rule(rule_name, f"{rule} space"))
        return str(super().visit(schema, name))


_INT_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _integer_bounds(schema: dict[str, Any]) -> tuple[int | None, int | None]:
    """[minimum, maximum] of an integer schema, the exclusive bounds made inclusive."""
    lo: int | None = None
    hi: int | None = None
    if isinstance(schema.get("minimum"), int | float):
        lo = math.ceil(schema["minimum"])
    if isinstance(schema.get("exclusiveMinimum"), int | float):
        lo = max(lo if lo is not None else -math.inf, math.floor(schema["exclusiveMinimum"]) + 1)
    if isinstance(schema.get("maximum"), int | float):
        hi = math.floor(schema["maximum"])
    if isinstance(schema.get("exclusiveMaximum"), int | float):
        hi = min(hi if hi is not None else math.inf, math.ceil(schema["exclusiveMaximum"]) - 1)
    return lo, hi


def check_schema(schema: Any, *, param: str) -> None:
    """Raise InvalidRequestError unless the schema is within every bound."""
    size = len(json.dumps(schema, ensure_ascii=False).encode("utf-8", errors="surrogatepass"))
    if size > MAX_SCHEMA_BYTES:
        _refuse(param, f"{size} bytes", f"the limit is {MAX_SCHEMA_BYTES} bytes")
    _walk(schema, param, depth=0)


def _walk(node: Any, param: str, depth: int) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        _refuse(param, f"nested more than {MAX_SCHEMA_DEPTH} levels deep", "")
    if isinstance(node, list):
        for item in node:
            _walk(item, param, depth + 1)
        return
    if not isinstance(node, dict):
        return
    enum = node.get("enum")
    if isinstance(enum, list) and len(enum) > MAX_ENUM_VALUES:
        _refuse(param, f"an enum of {len(enum)} values", f"the limit is {MAX_ENUM_VALUES}")
    for key in _BOUND_KEYS:
        value = node.get(key)
        if isinstance(value, int | float) and value > MAX_SCHEMA_REPETITION:
            _refuse(param, f"{key} {value}", f"the limit is {MAX_SCHEMA_REPETITION}")
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        for low, high in _QUANTIFIER.findall(pattern):
            bound = max(int(low), int(high) if high else 0)
            if bound > MAX_SCHEMA_REPETITION:
                _refuse(
                    param,
                    f"a pattern repetition of {bound}",
                    f"the limit is {MAX_SCHEMA_REPETITION}",
                )
    for value in node.values():
        if isinstance(value, dict | list):
            _walk(value, param, depth + 1)


def _refuse(param: str, what: str, limit: str) -> None:
    tail = f"; {limit}" if limit else ""
    raise InvalidRequestError(f"the JSON schema is too large: {what}{tail}", param=param)


def schema_to_gbnf(schema: dict[str, Any], *, param: str) -> str:
    """A grammar whose every output parses strictly and validates against ``schema``."""
    check_schema(schema, param=param)
    converter = _StrictConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        resolved = converter.resolve_refs(schema, "stdin")
        converter.visit(resolved, "")
        grammar = str(converter.format_grammar())
    except InvalidRequestError:
        raise
    except RecursionError:
        raise InvalidRequestError(
            "the JSON schema refers to itself in a way that never ends ($ref loop)", param=param
        ) from None
    except Exception as exc:  # the converter raises plain exceptions on odd schemas
        raise InvalidRequestError(f"unsupported JSON schema: {exc}", param=param) from None
    return re.sub(r"(?m)^dot ::= .*$", lambda _: f"dot ::= {_STRICT_DOT}", grammar)
