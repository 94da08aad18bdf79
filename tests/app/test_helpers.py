"""The small pure pieces: command line, error explanations, ring buffer, markdown, chat store."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from app.page_models.markdown_render import markdown_to_html
from app.page_models.ring_buffer import RingBuffer
from app.page_models.server_command import base_url, launcher_prefix, serve_arguments
from app.page_models.server_errors import explain_exit
from app.page_models.snippets import SNIPPETS
from app.storage.app_settings import ServerKnobs
from app.storage.chat_store import ChatMessage, ChatStore, Conversation
from backend.entrypoints.main import build_parser


def test_serve_arguments_are_accepted_by_the_real_cli(tmp_path: Path) -> None:
    knobs = ServerKnobs(
        ctx_size=1024,
        parallel=2,
        cache_type_k="q8_0",
        flash_attn="on",
        api_key="sekret",
        cors_origins=["http://a", "http://b"],
        port=0,
        kv_unified=True,
    )
    args = serve_arguments(knobs, tmp_path / "port")
    assert launcher_prefix()[-3:] == [sys.executable, "-m", "backend.entrypoints.main"]
    parsed = build_parser().parse_args(args)
    assert parsed.command == "serve"
    assert parsed.ctx_size == "1024" or parsed.ctx_size == 1024
    assert parsed.cache_type_k == "q8_0"
    assert parsed.flash_attn == "on"
    assert parsed.kv_unified is True
    assert "sekret" not in " ".join(args)  # the key travels in the environment, not in argv
    assert parsed.cors_origins == ["http://a", "http://b"]
    assert parsed.port_file == str(tmp_path / "port")
    assert "--api-key" not in serve_arguments(ServerKnobs(), tmp_path / "p")


def test_base_url_for_wildcard_binds() -> None:
    assert base_url("0.0.0.0", 81) == "http://127.0.0.1:81"
    assert base_url("::1", 81) == "http://[::1]:81"
    assert base_url("127.0.0.1", 81) == "http://127.0.0.1:81"


def test_explain_exit_in_plain_words() -> None:
    oom = explain_exit(
        [
            "loading",
            "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 9999",
        ],
        -6,
        True,
    )
    assert oom.kind == "oom" and "out of memory" in str(oom)
    port = explain_exit(["OSError: [Errno 98] Address already in use"], 1, False)
    assert port.kind == "port_in_use"
    missing = explain_exit(["quantdesk: error: model file not found: /x.gguf"], 3, False)
    assert missing.kind == "model_not_found"
    other = explain_exit(["something odd happened"], None, True)
    assert other.kind == "crash" and "something odd happened" in str(other)
    # "oom" inside a word (a BLOOM model, a room) is not out of memory
    bloom = explain_exit(["loaded bloom-560m.gguf", "Killed: no room left"], None, True)
    assert bloom.kind == "crash"
    assert explain_exit(["CUDA error: OOM"], 1, False).kind == "oom"


def test_ring_buffer_keeps_the_latest_in_order() -> None:
    rb = RingBuffer(4, 2)
    assert len(rb) == 0 and np.isnan(rb.last(0))
    for i in range(6):
        rb.append(float(i), (i, 10 * i))
    assert len(rb) == 4
    assert rb.times().tolist() == [2.0, 3.0, 4.0, 5.0]
    assert rb.series(1).tolist() == [20.0, 30.0, 40.0, 50.0]
    assert rb.last(0) == 5.0
    assert np.shares_memory(rb.series(0), rb._v)  # a view, not a copy
    rb.clear()
    assert len(rb) == 0 and rb.times().size == 0


def test_markdown_highlights_code() -> None:
    html = markdown_to_html("Use **this**:\n\n```python\ndef f():\n    return 1\n```\n<b>x</b>")
    assert "<strong>this</strong>" in html
    assert 'style="color:' in html.replace('style="color: ', 'style="color:')  # pygments spans
    assert "def" in html
    assert "&lt;b&gt;" in html  # raw HTML from the model is shown, not interpreted


def test_chat_store_round_trip(isolated_home: Path) -> None:
    store = ChatStore()
    assert store.folder == isolated_home / "chats"
    conv = Conversation(system_prompt="be brief")
    conv.messages.append(ChatMessage(role="user", content="What is   a GGUF file?"))
    conv.messages.append(ChatMessage(role="assistant", content="A format.", meta={"tokens": 3}))
    conv.auto_title()
    store.save(conv)
    other = Conversation(title="Second")
    store.save(other)
    listed = store.list()
    assert [c.id for c in listed] == [other.id, conv.id]
    loaded = store.load(conv.id)
    assert loaded.title == "What is a GGUF file?"
    assert loaded.messages[1].meta == {"tokens": 3}
    assert loaded.api_messages()[0] == {"role": "system", "content": "be brief"}
    (store.folder / "broken.json").write_text("{", encoding="utf-8")
    assert len(store.list()) == 2
    store.delete(conv.id)
    assert [c.id for c in store.list()] == [other.id]


def test_snippets_carry_url_model_and_key() -> None:
    for _title, func in SNIPPETS:
        text = func("http://127.0.0.1:9", "m1", "k1")
        assert "http://127.0.0.1:9" in text and "m1" in text and "k1" in text
        assert "k1" not in func("http://127.0.0.1:9", "m1", "")
