"""Images placed with M-RoPE (Qwen2-VL and later), on the tiny Qwen2-VL made here: an
image's tokens share one time position and take ``max(rows, columns)`` positions, so past
an image a token's position is no longer its KV cell. The prefix cache still cuts and
copies by cell: these tests ask again, follow up and branch, and the answers must stay the
model's own."""

from __future__ import annotations

from typing import Any

import httpx

from tests.media.conftest import ask_parts
from tests.media.image_files import data_url, picture
from tests.server.conftest import LiveServer

QUESTION = "What is in the picture?"


def image_part(image: bytes) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": data_url(image)}}


def ask(server: LiveServer, image: bytes, question: str = QUESTION) -> Any:
    return ask_parts(server, [image_part(image), {"type": "text", "text": question}])


def test_an_m_rope_projector_is_served_with_its_model(qwen_vl_server: LiveServer) -> None:
    props = httpx.get(f"{qwen_vl_server.base_url}/props", timeout=10).json()
    assert props["modalities"] == {"vision": True, "audio": False}


def test_the_answer_depends_on_the_image_and_a_repeat_is_a_cache_hit(
    qwen_vl_server: LiveServer,
) -> None:
    wide = picture("stripes", size=112, height=56)  # a 4 x 2 grid: 8 tokens, 4 positions
    answers = {
        kind: ask(qwen_vl_server, img).choices[0].message.content
        for kind, img in (
            ("red", picture("red-square", size=56)),
            ("blue", picture("blue-circle", size=56)),
            ("wide", wide),
        )
    }
    assert len(set(answers.values())) >= 2, answers
    again = ask(qwen_vl_server, wide)
    # the whole prompt but its last token comes from the cache, cut back by position
    assert again.usage.prompt_tokens_details.cached_tokens == again.usage.prompt_tokens - 1
    assert again.choices[0].message.content == answers["wide"]


def test_a_follow_up_after_an_image_continues_the_cached_conversation(
    qwen_vl_layouts: LiveServer,
) -> None:
    """The second turn reuses the first's KV (image included) and decodes its new text at
    positions past the image's; asked again after another conversation, from the cache
    again (copied, restored from the RAM tier or in its slot, by layout), the answer is the
    same (llama-server's, in test_llama_server_parity)."""
    server = qwen_vl_layouts
    image = picture("blue-circle", size=112, height=56)

    def turn(history: list[dict[str, Any]]) -> Any:
        return server.client().chat.completions.create(
            model="any", messages=history, max_tokens=12, temperature=0
        )

    first_turn = [
        {"role": "user", "content": [image_part(image), {"type": "text", "text": QUESTION}]}
    ]
    first = turn(first_turn)
    history = [
        *first_turn,
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "And what colour is it?"},
    ]
    follow = turn(history)
    assert follow.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens
    ask(server, picture("red-square", size=56))  # another conversation in between
    again = turn(history)
    assert again.choices[0].message.content == follow.choices[0].message.content
    assert again.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens
