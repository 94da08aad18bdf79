"""Requests that used to kill the server process (issue 14, points 1 and 2).

Each runs against a real ``quantdesk serve`` child process: a C++ abort or a native
stack overflow inside llama.cpp ends the process, which an in-process server would
turn into a dead test run. After every case the same process must still answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import child_base_url, wait_healthy

SERVE = [sys.executable, "-m", "backend.entrypoints.main", "serve", "-m", "default", "--port", "0"]


@pytest.fixture(scope="module")
def child_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port_file = tmp_path_factory.mktemp("serve") / "port"
    log = tmp_path_factory.mktemp("serve-log") / "server.log"
    out = log.open("w")
    proc = subprocess.Popen(
        [*SERVE, "--port-file", str(port_file), "-c", "2048", "-np", "4", "-t", "2", "--seed", "1"],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = child_base_url(proc, port_file)
        wait_healthy(base)
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        out.close()


def _chat(base: str, **body: Any) -> httpx.Response:
    payload = {"messages": [{"role": "user", "content": "Give me a JSON object."}], **body}
    return httpx.post(f"{base}/v1/chat/completions", json=payload, timeout=120)


def _assert_alive(base: str, proc: subprocess.Popen[str]) -> None:
    assert proc.poll() is None, f"the server died with exit code {proc.returncode}"
    assert httpx.get(f"{base}/health", timeout=10).status_code == 200


GRAMMAR_CASES: dict[str, dict[str, Any]] = {
    "json_object": {"response_format": {"type": "json_object"}},
    "grammar": {"grammar": 'root ::= "yes" | "no"'},
    "json_schema const": {
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"const": 1}}}
    },
}


@pytest.mark.parametrize("case", list(GRAMMAR_CASES))
def test_a_complete_grammar_ends_the_sequence_despite_ignore_eos(
    child_server: tuple[str, subprocess.Popen[str]], case: str
) -> None:
    base, proc = child_server
    r = _chat(base, ignore_eos=True, max_tokens=48, temperature=0, **GRAMMAR_CASES[case])
    _assert_alive(base, proc)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] in ("stop", "length")
    content = choice["message"]["content"]
    if case == "grammar":
        assert content in ("yes", "no")
        assert choice["finish_reason"] == "stop"
    elif case == "json_schema const":
        assert json.loads(content) == 1
        assert choice["finish_reason"] == "stop"


HUGE_SCHEMAS = {
    "maxItems": {"type": "array", "items": {"type": "integer"}, "maxItems": 1_000_000},
    "maxLength": {"type": "string", "maxLength": 1_000_000},
    "enum": {"enum": [f"v{i}" for i in range(100_000)]},
    "deep": json.loads('{"type":"array","items":' * 200 + '{"type":"integer"}' + "}" * 200),
}


@pytest.mark.parametrize("case", list(HUGE_SCHEMAS))
def test_a_schema_past_the_bounds_gets_a_400_naming_the_limit(
    child_server: tuple[str, subprocess.Popen[str]], case: str
) -> None:
    base, proc = child_server
    schema = HUGE_SCHEMAS[case]
    r = _chat(base, response_format={"type": "json_schema", "json_schema": {"schema": schema}})
    _assert_alive(base, proc)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "response_format"
    assert "limit" in error["message"] or "levels deep" in error["message"]


def test_a_grammar_past_the_bounds_gets_a_400(
    child_server: tuple[str, subprocess.Popen[str]],
) -> None:
    base, proc = child_server
    deep = "root ::= " + "(" * 100_000 + '"a"' + ")" * 100_000
    r = _chat(base, grammar=deep, max_tokens=4)
    _assert_alive(base, proc)
    assert r.status_code == 400, r.text
    assert "nested groups" in r.json()["error"]["message"]
    r = _chat(base, grammar='root ::= "a"{0,1000000}', max_tokens=4)
    _assert_alive(base, proc)
    assert r.status_code == 400 and "repetition" in r.json()["error"]["message"]


def test_recursive_refs_do_not_loop(child_server: tuple[str, subprocess.Popen[str]]) -> None:
    base, proc = child_server
    schemas = [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
    ]
    for schema in schemas:
        r = _chat(
            base,
            max_tokens=16,
            response_format={"type": "json_schema", "json_schema": {"schema": schema}},
        )
        _assert_alive(base, proc)
        assert r.status_code in (200, 400), r.text


def test_a_grammar_no_token_can_continue_fails_that_request_alone(
    child_server: tuple[str, subprocess.Popen[str]],
) -> None:
    """A token piece that starts with NUL is never allowed by llama.cpp's grammar, so
    this grammar has no next token: llama.cpp would abort on the pick. The request gets
    an error; a stream running beside it finishes normally."""
    base, proc = child_server
    streamed: list[str] = []

    def stream() -> None:
        body = {
            "messages": [{"role": "user", "content": "Count to twenty."}],
            "max_tokens": 64,
            "ignore_eos": True,
            "stream": True,
        }
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=120) as r:
            streamed.extend(line for line in r.iter_lines() if line.startswith("data:"))

    other = threading.Thread(target=stream)
    other.start()
    r = _chat(base, grammar='root ::= "\\x00"', max_tokens=8)
    other.join(timeout=120)
    _assert_alive(base, proc)
    assert r.status_code == 400
    assert "grammar" in r.json()["error"]["message"]
    assert streamed[-1] == "data: [DONE]"
    finishes = [json.loads(s[5:])["choices"][0]["finish_reason"] for s in streamed[:-1]]
    assert "length" in finishes


def test_every_server_case_left_it_serving(
    child_server: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    base, proc = child_server
    r = _chat(base, max_tokens=4, temperature=0)
    _assert_alive(base, proc)
    assert r.status_code == 200
