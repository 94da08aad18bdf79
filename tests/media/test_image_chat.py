"""Images through every dialect, on the tiny VLM: the real openai and anthropic SDKs."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

from benchmarks.tiny_vlm import TOKENS_PER_IMAGE
from tests.media.conftest import MAX_PIXELS, ask_parts
from tests.media.image_files import data_url, picture
from tests.server.conftest import LiveServer

QUESTION = "What is in the picture?"


def ask(server: LiveServer, image: bytes | None, question: str = QUESTION, **kw: object) -> object:
    parts: list[dict[str, object]] = []
    if image is not None:
        parts.append({"type": "image_url", "image_url": {"url": data_url(image)}})
    parts.append({"type": "text", "text": question})
    return ask_parts(server, parts, **kw)


def answer(server: LiveServer, image: bytes | None, question: str = QUESTION) -> str:
    return ask(server, image, question).choices[0].message.content or ""  # type: ignore[attr-defined]


def test_the_model_says_it_takes_images(vlm_server: LiveServer) -> None:
    props = httpx.get(f"{vlm_server.base_url}/props", timeout=10).json()
    assert props["modalities"] == {"vision": True, "audio": False}
    card = vlm_server.client().models.list().data[0]
    assert card.meta["modalities"]["vision"] is True  # type: ignore[attr-defined]
    assert card.meta["mmproj"] == "mmproj.gguf"  # type: ignore[attr-defined]
    stats = vlm_server.stats()
    assert stats["model"]["vision"] is True
    assert set(stats["media"]) == {"images_encoded", "images_reused", "encode_ms_avg"}


def test_the_answer_depends_on_the_image_and_only_on_it(vlm_server: LiveServer) -> None:
    red, blue, stripes = (picture(k) for k in ("red-square", "blue-circle", "stripes"))
    answers = {k: answer(vlm_server, img) for k, img in (("r", red), ("b", blue), ("s", stripes))}
    assert len(set(answers.values())) >= 2, answers  # pictures change the greedy answer
    assert answer(vlm_server, red) == answers["r"]  # the same picture, the same answer
    # the same pixels in another file format: the same image to the model
    assert answer(vlm_server, picture("red-square", fmt="BMP")) == answers["r"]


def test_image_tokens_are_counted_and_a_repeated_image_is_a_cache_hit(
    vlm_server: LiveServer,
) -> None:
    text_only = ask(vlm_server, None).usage  # type: ignore[attr-defined]
    image = picture("stripes", size=80)
    first = ask(vlm_server, image, "Describe it, please.").usage  # type: ignore[attr-defined]
    # the image's tokens, and the model's image delimiters, are part of the prompt
    assert first.prompt_tokens >= text_only.prompt_tokens + TOKENS_PER_IMAGE
    again = ask(vlm_server, image, "Describe it, please. Now!").usage  # type: ignore[attr-defined]
    other = ask(vlm_server, picture("blue-circle", size=80), "Describe it, please.").usage  # type: ignore[attr-defined]
    # another picture reuses only the text before the image; the same one, the image too
    # and the text after it up to where the question differs
    before_image = other.prompt_tokens_details.cached_tokens
    assert 0 < before_image <= first.prompt_tokens - TOKENS_PER_IMAGE
    assert again.prompt_tokens_details.cached_tokens >= before_image + TOKENS_PER_IMAGE + 2


def test_anthropic_image_blocks_read_as_chat_image_parts(vlm_server: LiveServer) -> None:
    image = picture("blue-circle")
    client = anthropic.Anthropic(base_url=vlm_server.base_url, api_key="unused", max_retries=0)
    reply = client.messages.create(
        model="any",
        max_tokens=12,
        extra_body={"temperature": 0},
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": "image/png",
                            "data": data_url(image).split(",", 1)[1],
                        },
                    },
                    {"type": "text", "text": QUESTION},
                ],
            }
        ],
    )
    text = "".join(b.text for b in reply.content if b.type == "text")
    assert text == answer(vlm_server, image)
    assert reply.usage.input_tokens >= TOKENS_PER_IMAGE


def test_responses_input_image_reads_as_chat_image_parts(vlm_server: LiveServer) -> None:
    image = picture("red-square")
    reply = vlm_server.client().responses.create(
        model="any",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": data_url(image), "detail": "auto"},
                    {"type": "input_text", "text": QUESTION},
                ],
            }
        ],
        max_output_tokens=12,
        temperature=0,
    )
    assert reply.output_text == answer(vlm_server, image)


@pytest.mark.parametrize(
    ("url", "status", "words"),
    [
        (data_url(picture("red-square")[:200]), 400, "corrupt or truncated"),
        (data_url(b"%PDF-1.7 not a picture"), 400, "not an image"),
        ("data:image/png;base64,@@@not-base64@@@", 400, "not valid base64"),
        ("https://example.com/cat.png", 400, "does not fetch remote"),
        (data_url(picture("stripes", size=400)), 413, f"limit of {MAX_PIXELS}"),
    ],
)
def test_bad_images_are_a_clear_4xx_and_the_server_goes_on(
    vlm_server: LiveServer, url: str, status: int, words: str
) -> None:
    parts = [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "Hi"}]
    with pytest.raises(openai.APIStatusError) as info:
        vlm_server.client().chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": parts}],  # type: ignore[list-item,misc]
            max_tokens=4,
        )
    assert info.value.status_code == status
    assert words in info.value.message
    assert answer(vlm_server, picture("red-square"))  # still serving


def test_too_many_images_is_a_413_in_anthropic_shape(vlm_server: LiveServer) -> None:
    block = {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": data_url(picture("stripes")).split(",", 1)[1],
        },
    }
    body = {
        "model": "any",
        "max_tokens": 4,
        "messages": [{"role": "user", "content": [block] * 17 + [{"type": "text", "text": "?"}]}],
    }
    r = httpx.post(f"{vlm_server.base_url}/v1/messages", json=body, timeout=60)
    assert r.status_code == 413
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "request_too_large"


def test_a_request_that_goes_away_stops_encoding_its_images(vlm_server: LiveServer) -> None:
    """Encoding stops between two images once the client has gone (the route's
    ``cancelled``): none is encoded for nobody, and nothing reaches the scheduler."""
    from backend.engine.media.image_decode import decode_image
    from backend.engine.media.projector import MARKER, EncodeCancelled
    from backend.settings.media_settings import MediaLimits

    engine = vlm_server.handle.app.state.engine
    images = [decode_image(picture("stripes", size=s), MediaLimits(), "x") for s in (71, 73)]
    before = engine.stats().media.images_encoded
    with pytest.raises(EncodeCancelled):
        engine.tokenize_with_media(
            f"{MARKER}{MARKER} two new pictures", images, add_special=True, cancelled=lambda: True
        )
    assert engine.stats().media.images_encoded == before
    prompt = engine.tokenize_with_media(f"{MARKER}{MARKER} two", images, add_special=True)
    assert [s.n_tokens for s in prompt.spans] == [TOKENS_PER_IMAGE] * 2
    assert engine.stats().media.images_encoded == before + 2


def test_llama_servers_completion_takes_multimodal_data(vlm_server: LiveServer) -> None:
    """/completion's prompt object: the text with a marker per image, the images base64."""
    from backend.engine.media.projector import MARKER

    def complete(*images: bytes) -> httpx.Response:
        prompt = {
            "prompt_string": f"{MARKER * len(images)}Describe it.",
            "multimodal_data": [data_url(i).split(",", 1)[1] for i in images],
        }
        body = {"prompt": prompt, "n_predict": 8, "temperature": 0}
        return httpx.post(f"{vlm_server.base_url}/completion", json=body, timeout=120)

    red, blue = complete(picture("red-square")), complete(picture("blue-circle"))
    assert red.status_code == blue.status_code == 200, red.text
    assert red.json()["tokens_evaluated"] >= TOKENS_PER_IMAGE
    assert red.json()["content"] != blue.json()["content"]
    assert complete(picture("red-square")).json()["content"] == red.json()["content"]
    mismatch = httpx.post(
        f"{vlm_server.base_url}/completion",
        json={"prompt": {"prompt_string": "no marker", "multimodal_data": ["AAAA"]}},
        timeout=60,
    )
    assert mismatch.status_code == 400


def test_ollama_images_read_as_chat_image_parts(vlm_server: LiveServer) -> None:
    """Ollama's ``images`` (base64, through the official client) on chat and generate: the
    same image tokens as chat's ``image_url``, and ``vision`` among the capabilities."""
    import ollama

    c = ollama.Client(host=vlm_server.base_url)
    assert "vision" in (c.show("model").capabilities or [])
    image = picture("red-square")
    reply = c.chat(
        model="model",
        messages=[{"role": "user", "content": QUESTION, "images": [image]}],
        options={"temperature": 0, "num_predict": 12},
    )
    assert reply.message.content == answer(vlm_server, image)
    assert (reply.prompt_eval_count or 0) >= TOKENS_PER_IMAGE
    generated = c.generate(
        model="model", prompt=QUESTION, images=[image], options={"temperature": 0, "num_predict": 4}
    )
    assert (generated.prompt_eval_count or 0) >= TOKENS_PER_IMAGE
    with pytest.raises(ollama.ResponseError) as info:
        c.chat(model="model", messages=[{"role": "user", "content": "?", "images": [b"junk"]}])
    assert info.value.status_code == 400
