"""A server on the embedded SmolLM2 with a chat template that renders tools (SmolLM2's own
renders none, and Ollama's clients offer tools only to a model that says it takes them)."""

from __future__ import annotations

from collections.abc import Iterator

import ollama
import pytest

from tests.server.conftest import LiveServer, start_server, wait_healthy

MODEL = "SmolLM2-135M-Instruct"
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call these tools: {{ tools | tojson }}\n"
    'Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>\n'
    "{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}<|im_end|>\n"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
GREEDY = {"temperature": 0, "seed": 1}


@pytest.fixture(scope="package")
def ollama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from templated_server(tmp_path_factory, TOOLS_TEMPLATE, ctx_size=8192, parallel=4)


def templated_server(
    tmp_path_factory: pytest.TempPathFactory, template: str, **engine: object
) -> Iterator[LiveServer]:
    """A server on the embedded SmolLM2 rendering its chats with ``template`` (a fixture's
    body: yields the server, stops it after)."""
    path = tmp_path_factory.mktemp("template") / "chat.jinja"
    path.write_text(template, encoding="utf-8")
    server = start_server(chat_template_file=str(path), **engine)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def client(server: LiveServer) -> ollama.Client:
    return ollama.Client(host=server.base_url)
