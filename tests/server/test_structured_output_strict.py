"""Structured output is strictly valid JSON that validates (issue 15, point 1).

The grammar level: inside a JSON string the schema grammar allows no raw control
character (llama-cpp-python's converter allowed any character but '"' and '\\').
The property level: many seeds x several schemas on the real model at temperature 1,
and every answer parses with ``json.loads(strict=True)`` and validates with jsonschema,
for ``response_format`` and for forced tool calls alike.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import llama_cpp
import numpy as np
import pytest

from backend.server.json_schema_grammar import schema_to_gbnf
from tests.server.conftest import LiveServer


@pytest.fixture(scope="module")
def vocab(smollm2_path: Path) -> Iterator[object]:
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(smollm2_path).encode(), params)
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


def _token(vocab: object, text: str) -> int:
    buf = (llama_cpp.llama_token * 8)()
    n = llama_cpp.llama_tokenize(vocab, text.encode(), len(text.encode()), buf, 8, False, True)
    assert n == 1, f"{text!r} is {n} tokens"
    return int(buf[0])


def _allowed(vocab: object, grammar: str, prefix: list[int], tokens: list[int]) -> list[bool]:
    """Which of ``tokens`` the grammar allows after accepting ``prefix``."""
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    assert sampler
    try:
        for t in prefix:
            llama_cpp.llama_sampler_accept(sampler, t)
        cand = np.zeros(len(tokens), dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
        cand["id"] = tokens
        arr = llama_cpp.llama_token_data_array(
            data=cand.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            size=len(tokens),
            selected=-1,
            sorted=False,
        )
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(arr))
        return [bool(np.isfinite(v)) for v in cand["logit"]]
    finally:
        llama_cpp.llama_sampler_free(sampler)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"type": "string", "maxLength": 20},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    ],
    ids=["string", "bounded", "property"],
)
def test_inside_a_string_control_characters_are_refused(vocab: object, schema: Any) -> None:
    grammar = schema_to_gbnf(schema, param="response_format")
    opening = ['"'] if schema["type"] == "string" else ['{"', "a", '":', '"']
    prefix = [_token(vocab, t) for t in opening]
    newline, tab, letter, escape = (_token(vocab, t) for t in ("\n", "\t", "a", "\\"))
    assert _allowed(vocab, grammar, prefix, [newline, tab, letter, escape]) == [
        False,
        False,
        True,
        True,
    ]


SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string", "maxLength": 12},
                "minItems": 1,
                "maxItems": 3,
            },
            "owner": {
                "type": "object",
                "properties": {"id": {"type": "string", "maxLength": 16}},
                "required": ["id"],
                "additionalProperties": False,
            },
        },
        "required": ["tags", "owner"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "colour": {"enum": ["red", "green", "blue"]},
            "note": {"type": "string", "maxLength": 30},
        },
        "required": ["colour", "note"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}},
        "required": ["code"],
        "additionalProperties": False,
    },
    {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 4},
]
SEEDS = range(6)
PROMPT = "Write a short JSON answer about a person with a multi-line note.\n\tIndent it."


def test_every_structured_answer_parses_strictly_and_validates(live_server: LiveServer) -> None:
    model = live_server.client().models.list().data[0].id
    cases = [(schema, seed) for schema in SCHEMAS for seed in SEEDS]

    def run(case: tuple[dict[str, Any], int]) -> tuple[str, str]:
        schema, seed = case
        r = live_server.client().chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": schema},
            },
            temperature=1.0,
            seed=seed,
            max_tokens=200,
        )
        return r.choices[0].message.content or "", r.choices[0].finish_reason

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(run, cases))
    finished = 0
    for (schema, seed), (content, reason) in zip(cases, answers, strict=True):
        if reason != "stop":
            continue  # cut by max_tokens: incomplete by definition
        finished += 1
        value = json.loads(content, strict=True)
        jsonschema.validate(value, schema)
        assert seed >= 0
    assert finished >= len(cases) * 3 // 4, f"only {finished} of {len(cases)} finished"


def test_forced_tool_call_arguments_parse_strictly(live_server: LiveServer) -> None:
    params = SCHEMAS[0]
    tool = {"type": "function", "function": {"name": "save", "parameters": params}}
    client = live_server.client()
    model = client.models.list().data[0].id
    for seed in SEEDS:
        r = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPT}],
            tools=[tool],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "save"}},
            temperature=1.0,
            seed=seed,
            max_tokens=200,
        )
        calls = r.choices[0].message.tool_calls
        assert calls, r.choices[0].message.content
        args = json.loads(calls[0].function.arguments, strict=True)  # type: ignore[union-attr]
        jsonschema.validate(args, params)
