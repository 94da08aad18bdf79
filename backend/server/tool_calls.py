"""Tools for chat: render them for the model, force calls by grammar, parse calls back.

Calls are read in the common JSON-in-tags form ``<tool_call>{"name", "arguments"}</tool_call>``
(Hermes, Qwen, SmolLM3, ...) or as a bare JSON object/array of such objects.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from backend.server.errors import ApiError
from backend.server.structured_output import rename_root, schema_grammar

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI sends it
    id: str

    def to_openai(self, index: int | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }
        if index is not None:
            out["index"] = index
        return out


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    funcs = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if tool.get("type", "function") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ApiError(
                400,
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name', 'parameters'}}}}",
                param=f"tools[{i}]",
            )
        funcs.append(fn)
    return funcs


def forced_function(
    tool_choice: str | dict[str, Any] | None, tools: list[dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """The functions one of which must be called, or None when calling is optional."""
    funcs = _functions(tools)
    if tool_choice == "required":
        return funcs
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")  # its shape is checked by the request schema
        name = function.get("name") if isinstance(function, dict) else None
        chosen = [f for f in funcs if f["name"] == name]
        if not chosen:
            raise ApiError(
                400, f"tool_choice names '{name}', which is not in tools", param="tool_choice"
            )
        return chosen
    return None


def tool_call_grammar(funcs: list[dict[str, Any]]) -> str:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` for one of ``funcs``."""
    variants = []
    defs: dict[str, Any] = {}
    for i, fn in enumerate(funcs):
        params = fn.get("parameters") or {"type": "object"}
        if isinstance(params, dict):
            params = _hoisted_refs(params, f"tool{i}", defs)
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn["name"]}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    schema = variants[0] if len(variants) == 1 else {"oneOf": variants}
    if defs:
        schema = {**schema, "$defs": defs}
    body = rename_root(schema_grammar(schema, param="tools"), "tool-call-body")
    return f'root ::= "{OPEN}\\n" tool-call-body "\\n{CLOSE}"\n{body}'


_DEFS_KEYS = ("$defs", "definitions")


def _hoisted_refs(params: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """``params`` with its local ``$ref``s pointing into ``defs``, which the grammar's schema
    carries at its root: a ref is resolved from the root of the schema it is in, and here
    the parameters sit inside the call's object. ``#/$defs/X`` (or ``#/definitions/X``)
    becomes ``#/$defs/{prefix}-X``, so two tools' ``Item``s stay apart; any other local
    pointer (``#`` itself: a recursive schema) points into the parameters, kept whole as
    ``{prefix}``. Other refs are left for the converter to refuse."""
    root = f"#/$defs/{prefix}"
    found_refs = False

    def rewrite(node: Any) -> Any:
        nonlocal found_refs
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {k: rewrite(v) for k, v in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str) and (ref == "#" or ref.startswith("#/")):
            found_refs = True
            head, _, rest = ref[2:].partition("/")
            if head in _DEFS_KEYS and rest and "/" not in rest:
                out["$ref"] = f"{root}-{rest}"
            else:
                out["$ref"] = root + ref[1:]
        return out

    rewritten = rewrite(params)
    if not found_refs:
        return params
    for key in _DEFS_KEYS:
        found = rewritten.pop(key, None)
        if isinstance(found, dict):
            defs.update({f"{prefix}-{name}": sub for name, sub in found.items()})
    defs[prefix] = rewritten
    return rewritten


def tools_system_text(tools: list[dict[str, Any]]) -> str:
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "You can call functions. Their signatures are inside <tools></tools>:\n"
        f"<tools>\n{lines}\n</tools>\n"
        "To call one, answer with a JSON object inside tags, exactly like:\n"
        f'{OPEN}\n{{"name": "<function-name>", "arguments": {{...}}}}\n{CLOSE}'
    )


def render_messages_for_tools(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, template_knows_tools: bool
) -> list[dict[str, Any]]:
    """Fold tools, assistant tool_calls and tool results into plain messages when the
    chat template has no tool support of its own."""
    if template_knows_tools:
        # Hugging Face templates take a call's arguments as an object (`| tojson`): a JSON
        # string from the client would reach the model quoted twice.
        return [_with_argument_objects(m) for m in messages]
    out: list[dict[str, Any]] = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = [
                f"{OPEN}\n{json.dumps({'name': c['function']['name'], 'arguments': _loads(c['function'].get('arguments'))})}\n{CLOSE}"  # noqa: E501
                for c in m.pop("tool_calls")
            ]
            m["content"] = ((m.get("content") or "") + "\n".join(calls)).strip()
        elif m.get("role") == "tool":
            m = {
                "role": "user",
                "content": f"<tool_response>\n{m.get('content', '')}\n</tool_response>",
            }
        out.append(m)
    if tools:
        text = tools_system_text(tools)
        if out and out[0].get("role") == "system":
            out[0] = {**out[0], "content": f"{out[0].get('content', '')}\n\n{text}"}
        else:
            out.insert(0, {"role": "system", "content": text})
    return out


def _with_argument_objects(message: dict[str, Any]) -> dict[str, Any]:
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            call = {
                **call,
                "function": {**function, "arguments": _loads(function.get("arguments"))},
            }
        fixed.append(call)
    return {**message, "tool_calls": fixed}


def _loads(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def tool_names(tools: list[dict[str, Any]] | None) -> frozenset[str]:
    """Names of the functions a request declares."""
    return frozenset(
        str(t["function"]["name"])
        for t in tools or []
        if isinstance(t.get("function"), dict) and "name" in t["function"]
    )


_CALL_KEYS = frozenset({"name", "arguments", "parameters"})


def _to_call(obj: Any, names: frozenset[str] | None, *, bare: bool = False) -> ToolCall | None:
    """A call of a declared function (any name when ``names`` is None). A bare JSON
    answer counts only if it has nothing but a call's keys: ``{"name": "Alice", "age": 3}``
    is an answer, not a call."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    if names is not None and obj["name"] not in names:
        return None
    if bare and not set(obj) <= _CALL_KEYS:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(obj["name"], text, f"call_{uuid.uuid4().hex[:24]}")


def parse_calls(text: str, names: frozenset[str] | None = None) -> list[ToolCall]:
    """Tool calls in a whole block of text (tagged calls, or one bare JSON value) of the
    functions in ``names`` (any when None)."""
    calls: list[ToolCall] = []
    rest = text
    while OPEN in rest:
        start = rest.index(OPEN) + len(OPEN)
        end = rest.find(CLOSE, start)
        chunk = rest[start:] if end == -1 else rest[start:end]
        try:
            call = _to_call(json.loads(chunk.strip()), names)
        except json.JSONDecodeError:
            call = None
        if call:
            calls.append(call)
        rest = "" if end == -1 else rest[end + len(CLOSE) :]
    if calls:
        return calls
    stripped = text.strip()
    if stripped.startswith(("{", "[")):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            return []
        items = value if isinstance(value, list) else [value]
        found = [c for c in (_to_call(v, names, bare=True) for v in items) if c]
        return found if len(found) == len(items) else []
    return []


class ToolCallStream:
    """Split streamed text into content and tool calls as it arrives.

    Text before ``<tool_call>`` streams as content; a tagged call is emitted whole
    once its closing tag arrives. Output that starts like bare JSON is held while it can
    still be a bare call (its first key is a call's, its ``name`` a declared function's),
    then parsed at the end; JSON that cannot be a call streams as content as soon as
    that shows (``{"answer": ...`` after its first key).
    """

    def __init__(self, names: frozenset[str] | None = None) -> None:
        self._names = names
        self._buf = ""
        self._in_call = False
        self._bare = False
        self._started = False
        self._after_call = False  # the whitespace after a call's closing tag is dropped
        self.calls: list[ToolCall] = []

    def feed(self, text: str) -> tuple[str, list[ToolCall]]:
        self._buf += text
        if not self._started:
            head = self._buf.lstrip()
            if not head:
                return "", []
            self._started = True
            self._bare = head[0] in "{["
        if self._bare:
            if _could_be_bare_call(self._buf, self._names):
                return "", []
            self._bare = False  # an answer in JSON: it streams from here
        content, new_calls = "", []
        while True:
            if self._in_call:
                end = self._buf.find(CLOSE)
                if end == -1:
                    break
                tagged = OPEN + self._buf[: end + len(CLOSE)]
                found = parse_calls(tagged, self._names)
                new_calls += found
                if not found:  # not a call of a declared function: it stays text
                    content += tagged
                self._buf = self._buf[end + len(CLOSE) :]
                self._in_call = False
                continue
            start = self._buf.find(OPEN)
            if start == -1:
                keep = _partial_suffix(self._buf, OPEN)
                content += self._buf[: len(self._buf) - keep]
                self._buf = self._buf[len(self._buf) - keep :]
                break
            content += self._buf[:start]
            self._buf = self._buf[start + len(OPEN) :]
            self._in_call = True
        self.calls += new_calls
        if new_calls:
            self._after_call = True
        if self._after_call:  # the newlines between calls, not the spaces between words
            content = content.lstrip()
            self._after_call = not content
        return content, new_calls

    def finish(self) -> tuple[str, list[ToolCall]]:
        if self._bare:
            calls = parse_calls(self._buf, self._names)
            self.calls += calls
            return ("" if calls else self._buf), calls
        if self._in_call:  # unterminated call: try to parse what came
            calls = parse_calls(OPEN + self._buf, self._names)
            self.calls += calls
            return ("" if calls else OPEN + self._buf), calls
        rest, self._buf = self._buf, ""
        return rest, []


_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_OBJECT_OPEN = re.compile(r"\s*(?:\[\s*)?\{\s*")


def _could_be_bare_call(text: str, names: frozenset[str] | None) -> bool:
    """Whether ``text``, the start of an answer, may still turn out a bare JSON call: an
    object (or a list of them) whose first key is a call's, and whose ``name``, when it
    comes first, is a declared function's."""
    opening = _OBJECT_OPEN.match(text)
    if opening is None:
        return re.fullmatch(r"\s*(?:\[\s*)?", text) is not None  # '[' so far
    rest = text[opening.end() :]
    if not rest:
        return True
    if rest[0] != '"':
        return False  # '{}', or not JSON
    key_match = re.match(_JSON_STRING, rest)
    if key_match is None:  # the first key is still being written
        return any(k.startswith(rest[1:]) for k in _CALL_KEYS)
    try:
        key = json.loads(key_match.group())
    except json.JSONDecodeError:
        return False
    if key not in _CALL_KEYS:
        return False
    if key != "name" or names is None:
        return True
    after = rest[key_match.end() :]
    value = re.match(rf"\s*:\s*({_JSON_STRING})", after)
    if value is None:  # the name is still coming, unless it is no string
        return re.fullmatch(r'\s*(?::\s*(?:"[^"]*)?)?', after) is not None
    try:
        return bool(json.loads(value.group(1)) in names)
    except json.JSONDecodeError:
        return False


def _partial_suffix(text: str, tag: str) -> int:
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
