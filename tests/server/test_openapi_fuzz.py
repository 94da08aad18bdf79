"""Schemathesis against the app's own OpenAPI schema, on the live SmolLM2 server.

Every operation gets schemathesis's coverage cases (each field at its boundaries, one at
a time, valid and invalid) and random valid and invalid requests (positive and negative);
the server must never answer 5xx, and every 4xx must carry OpenAI's error shape
``{"error": {"message", "type", "param", "code"}}`` (under ``/v1/messages``, Anthropic's
``{"type": "error", "error": {"type", "message"}}``; under ``/api/``, Ollama's
``{"error": "..."}``). Bounded in time: a few dozen random
examples per operation (more for chat and completions, whose nested bodies hid the 500s of
issue 14), a wall-clock cap on each operation's random cases, no deadline per example, and
token counts capped in the fuzzed schema (``max_tokens`` and friends made required and at
most 4), so no case generates long.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis import GenerationMode
from schemathesis.generation.meta import TestPhase

from backend.server.app_factory import create_app
from backend.settings import EngineSettings, ServerSettings
from tests.server.conftest import LiveServer

MAX_EXAMPLES = 25  # random cases per operation, after its coverage cases
# Chat and completions take nested bodies (messages, tool calls, tool_choice, grammar),
# where 10 random cases never reached the 500s of issue 14: they get more.
DEEP_EXAMPLES = 200
DEEP_PATHS = r"^/v1/(chat/)?completions$"
# Seconds from an operation's first random case on, after which the cases hypothesis still
# generates are not sent: a slow or busy machine stays within a couple of minutes.
FUZZ_BUDGET_S = 20.0
MODEL = "SmolLM2-135M-Instruct"
TIMEOUT = 120
# Token budgets the fuzzer may ask for: required and tiny, so every case is quick.
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "n_predict", "max_output_tokens")
ERROR_KEYS = {"message", "type", "param", "code"}
ANTHROPIC_PATHS = "/v1/messages"  # and below it: Anthropic's error shape
OLLAMA_PATHS = "/api/"  # Ollama's routes: its error shape
# Status classes the fuzzing of an operation must reach: valid bodies answered 2xx, invalid
# ones 4xx (checked when the operation's cases are done, so also when one test runs alone).
MUST_REACH = {
    "POST /v1/chat/completions": {"2xx", "4xx"},
    "POST /v1/completions": {"2xx"},
    "POST /v1/embeddings": {"2xx", "4xx"},
    "POST /infill": {"4xx"},
    "POST /tokenize": {"2xx", "4xx"},
    "POST /completion": {"2xx", "4xx"},
    "GET /props": {"2xx"},
    "GET /slots": {"2xx"},
    "POST /apply-template": {"2xx", "4xx"},
    "POST /v1/responses": {"2xx", "4xx"},
    "POST /v1/messages": {"2xx", "4xx"},
    "POST /v1/messages/count_tokens": {"2xx", "4xx"},
}
FIRST_RANDOM_CASE: dict[str, float] = {}  # operation -> time.monotonic() of its first
# llama-server's deliberate 501 (with the error shape): slot actions without --slot-save-path
NOT_IMPLEMENTED = {"/slots/{id_slot}"}


def app_schema() -> dict[str, Any]:
    """The OpenAPI schema exactly as the app serves it (building the app loads no model)."""
    engine = EngineSettings.model_validate({})
    app = create_app(engine, ServerSettings.model_validate({"host": "127.0.0.1", "port": 0}))
    return app.openapi()


def bounded(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy that keeps valid cases quick and reachable: token budgets required and
    capped, ``n`` at most 2, the served model's id, a text prompt for completions."""
    schema = copy.deepcopy(schema)
    for component in schema["components"]["schemas"].values():
        props = component.get("properties", {})
        if "model" in props:  # valid bodies name the served model (others get a 404)
            props["model"] = {"type": "string", "enum": [MODEL]}
        props.pop("dimensions", None)  # only the model's own dimension is valid
        for name in TOKEN_FIELDS:
            if name in props:
                props[name] = {"type": "integer", "minimum": 1, "maximum": 4}
                component.setdefault("required", []).append(name)
        if "n" in props:
            props["n"] = {"type": "integer", "minimum": 1, "maximum": 2}
    # valid completions need one non-empty prompt; negative mode still sends the rest
    for name in ("CompletionRequest", "NativeCompletionRequest"):
        completion = schema["components"]["schemas"][name]
        completion["properties"]["prompt"] = {"type": "string", "minLength": 1, "maxLength": 200}
        completion.setdefault("required", []).append("prompt")
    return schema


def fuzzed_schema(max_examples: int) -> schemathesis.BaseSchema:
    """The bounded schema, valid and invalid cases; its own config, so its own count."""
    fuzzed = schemathesis.openapi.from_dict(bounded(app_schema()))
    fuzzed.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        max_examples=max_examples,
    )
    return fuzzed


broad = fuzzed_schema(MAX_EXAMPLES).exclude(path_regex=DEEP_PATHS)
deep = fuzzed_schema(DEEP_EXAMPLES).include(path_regex=DEEP_PATHS)
HYPOTHESIS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def check_response(case: schemathesis.Case, response: Any) -> None:
    request = f"{case.method} {case.formatted_path} body={case.body!r}"
    not_implemented = response.status_code == 501 and case.path in NOT_IMPLEMENTED
    assert response.status_code < 500 or not_implemented, (
        f"{response.status_code} for {request}: {response.text}"
    )
    if 400 <= response.status_code < 500 or not_implemented:
        body = response.json()
        if case.path.startswith(ANTHROPIC_PATHS):
            assert isinstance(body, dict) and set(body) == {"type", "error"}, request
            assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, request
            assert body["error"]["type"].endswith("_error"), f"{request}: {response.text}"
        elif case.path.startswith(OLLAMA_PATHS):  # Ollama's: {"error": "..."}
            assert isinstance(body, dict) and set(body) == {"error"}, f"{request}: {response.text}"
            assert isinstance(body["error"], str) and body["error"], f"{request}: {response.text}"
            return
        else:
            assert isinstance(body, dict) and set(body) == {"error"}, f"{request}: {response.text}"
            assert set(body["error"]) == ERROR_KEYS, f"{request}: {response.text}"
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]


def test_served_schema_is_the_fuzzed_one(live_server: LiveServer) -> None:
    served = httpx.get(f"{live_server.base_url}/openapi.json", timeout=TIMEOUT).json()
    assert served == app_schema()
    paths = set(served["paths"])
    for path in (
        "/v1/embeddings",
        "/infill",
        "/tokenize",
        "/detokenize",
        "/v1/models/{model_id}",
        "/v1/responses",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/completion",
        "/props",
        "/slots",
        "/apply-template",
        "/api/chat",
        "/api/generate",
        "/api/tags",
        "/api/show",
    ):
        assert path in paths


Outcomes = Counter[tuple[str, str, str]]  # (operation fuzzed, method and path sent, status)


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    """The calls of one test item, that is of one operation's cases (the coverage cases
    also send other methods to its path); once they are all done, the operation itself
    must have reached its ``MUST_REACH``."""
    seen: Outcomes = Counter()
    yield seen
    fuzzed = {operation for operation, _, _ in seen}
    assert len(fuzzed) == 1, f"one operation per test item, not {fuzzed}"
    (operation,) = fuzzed
    reached = {status for _, sent, status in seen if sent == operation}
    missing = MUST_REACH.get(operation, set()) - reached
    assert not missing, f"fuzzing {operation} never got a {sorted(missing)} answer: {seen}"


def fuzz(case: schemathesis.Case, server: LiveServer, outcomes: Outcomes) -> None:
    operation = f"{case.method} {case.path}"
    started = time.monotonic()
    if case.meta is not None and case.meta.phase.name is TestPhase.FUZZING:
        first = FIRST_RANDOM_CASE.setdefault(operation, started)
        if started - first > FUZZ_BUDGET_S:
            return
    response = case.call(base_url=server.base_url, timeout=TIMEOUT)
    outcomes[(case.operation.label, operation, f"{response.status_code // 100}xx")] += 1
    check_response(case, response)
    assert time.monotonic() - started < TIMEOUT


@pytest.mark.slow
@broad.parametrize()
@settings(HYPOTHESIS, max_examples=MAX_EXAMPLES)
def test_no_server_errors_and_openai_shaped_4xx(
    case: schemathesis.Case, live_server: LiveServer, outcomes: Outcomes
) -> None:
    fuzz(case, live_server, outcomes)


@pytest.mark.slow
@deep.parametrize()
@settings(HYPOTHESIS, max_examples=DEEP_EXAMPLES)
def test_chat_and_completions_deeper(
    case: schemathesis.Case, live_server: LiveServer, outcomes: Outcomes
) -> None:
    fuzz(case, live_server, outcomes)
