"""OpenAI API features IDE plugins and agent frameworks use: tools, structured output,
logprobs, n > 1 and best_of, through the official SDK on the real model."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest

from tests.server.conftest import LiveServer

MODEL = "SmolLM2-135M-Instruct"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


def test_forced_tool_call_is_parsable(live_server: LiveServer) -> None:
    r = live_server.client().chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=[WEATHER_TOOL],
        max_tokens=60,
        temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls
    assert calls and calls[0].function.name == "get_weather"
    args = json.loads(calls[0].function.arguments)
    jsonschema.validate(args, WEATHER_TOOL["function"]["parameters"])
    assert calls[0].id.startswith("call_")


def test_forced_tool_call_streams(live_server: LiveServer) -> None:
    stream = live_server.client().chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=[WEATHER_TOOL],
        max_tokens=60,
        temperature=0,
        tool_choice="required",
        stream=True,
    )
    names, args, reasons = [], "", []
    for chunk in stream:
        for c in chunk.choices:
            for tc in c.delta.tool_calls or []:
                if tc.function and tc.function.name:
                    names.append(tc.function.name)
                if tc.function and tc.function.arguments:
                    args += tc.function.arguments
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert names == ["get_weather"]
    jsonschema.validate(json.loads(args), WEATHER_TOOL["function"]["parameters"])
    assert reasons == ["tool_calls"]


def test_tool_results_round_trip(live_server: LiveServer) -> None:
    """A conversation with an assistant tool call and a tool result is accepted."""
    r = live_server.client().chat.completions.create(
        model=MODEL,
        max_tokens=16,
        temperature=0,
        tools=[WEATHER_TOOL],
        messages=[
            *ASK,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"city": "Paris", "unit": "celsius"}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
        ],
    )
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_json_schema_output_validates(live_server: LiveServer) -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0},
            "tags": {
                "type": "array",
                "items": {"type": "string", "maxLength": 16},
                "maxItems": 3,
            },
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    }
    r = live_server.client().chat.completions.create(
        model=MODEL,
        max_tokens=120,
        temperature=0.7,
        seed=3,
        messages=[{"role": "user", "content": "Describe a person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
    )
    content = r.choices[0].message.content or ""
    assert r.choices[0].finish_reason == "stop", content
    jsonschema.validate(json.loads(content, strict=True), schema)


def test_json_object_output_parses(live_server: LiveServer) -> None:
    r = live_server.client().chat.completions.create(
        model=MODEL,
        max_tokens=300,
        temperature=0,
        messages=[
            {
                "role": "user",
                "content": 'Return a JSON object with keys "name" and "age" for a cat named '
                "Tom aged 3.",
            }
        ],
        response_format={"type": "json_object"},
    )
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert isinstance(json.loads(r.choices[0].message.content or "", strict=True), dict)


def test_chat_logprobs(live_server: LiveServer) -> None:
    r = live_server.client().chat.completions.create(
        model=MODEL,
        messages=ASK,
        max_tokens=8,
        temperature=0,
        logprobs=True,
        top_logprobs=5,
    )
    content = r.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content is not None and len(content) == r.usage.completion_tokens  # type: ignore[union-attr]
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert t.logprob <= 0
        assert len(t.top_logprobs) == 5
        # greedy: the chosen token is the most likely one
        assert math.isclose(t.logprob, t.top_logprobs[0].logprob, abs_tol=1e-6)
        lps = [x.logprob for x in t.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        assert sum(math.exp(x) for x in lps) <= 1.0 + 1e-6


def test_n_choices_share_one_prompt_prefill(either_kv_server: LiveServer) -> None:
    live_server = either_kv_server
    before = live_server.stats()
    r = live_server.client().chat.completions.create(
        model=MODEL,
        n=3,
        max_tokens=12,
        temperature=1.0,
        seed=11,
        messages=[{"role": "user", "content": "Invent a name for a new colour."}],
    )
    after = live_server.stats()
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert all(c.message.content for c in r.choices)
    assert r.usage is not None
    prompt = r.usage.prompt_tokens
    decoded = after["tokens"]["prompt_decoded_total"] - before["tokens"]["prompt_decoded_total"]
    # prompt decoded once; each extra choice decodes only its last prompt token
    assert decoded <= prompt + 2, (decoded, prompt)


def test_completions_logprobs_echo_and_best_of(live_server: LiveServer) -> None:
    client = live_server.client()
    r = client.completions.create(
        model=MODEL, prompt="One, two,", max_tokens=5, temperature=0, logprobs=3
    )
    lp = r.choices[0].logprobs
    assert lp is not None and lp.tokens and "".join(lp.tokens) == r.choices[0].text
    assert all(len(d) == 3 for d in lp.top_logprobs or [])
    r = client.completions.create(
        model=MODEL, prompt="One, two,", max_tokens=5, temperature=0, echo=True
    )
    assert r.choices[0].text.startswith("One, two,")
    r = client.completions.create(
        model=MODEL, prompt="My pet is a", max_tokens=6, temperature=1.0, n=2, best_of=4, seed=5
    )
    assert len(r.choices) == 2


def test_unsupported_combinations_are_clear_400s(live_server: LiveServer) -> None:
    import openai

    client = live_server.client()
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="x", n=3, best_of=2)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=ASK, tool_choice="required")


def test_penalties_change_greedy_output(live_server: LiveServer) -> None:
    client = live_server.client()
    prompt = "Repeat after me: apple apple apple apple apple"
    plain = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
    penalised = client.completions.create(
        model=MODEL,
        prompt=prompt,
        max_tokens=12,
        temperature=0,
        extra_body={"repeat_penalty": 1.8, "presence_penalty": 1.5, "frequency_penalty": 1.0},
    )
    # the penalty sampler is in the chain: greedy output changes
    assert penalised.choices[0].text != plain.choices[0].text


def test_lone_surrogate_is_a_400(live_server: LiveServer) -> None:
    import httpx

    r = httpx.post(
        f"{live_server.base_url}/v1/completions",
        content=b'{"prompt": "a\\ud800b", "max_tokens": 2}',
        headers={"Content-Type": "application/json"},
        timeout=120,
    )
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"]
