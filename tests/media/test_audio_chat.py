"""Audio through chat's ``input_audio`` and llama-server's ``multimodal_data``, on the tiny
audio-language model (a Whisper-encoder projector): the real openai SDK, and the checks a
client's bad clip must meet."""

from __future__ import annotations

import random

import httpx
import openai
import pytest

from backend.engine.media.projector import MARKER
from tests.media.audio_files import audio_part, b64, clip
from tests.media.conftest import ask_parts
from tests.media.image_files import data_url, picture
from tests.server.conftest import LiveServer

QUESTION = "What do you hear?"
TOKENS_PER_CLIP = 750  # Qwen2-Audio's encoder: 30 s of audio (one clip, padded) to 750


def ask(server: LiveServer, audio: bytes | None, question: str = QUESTION) -> object:
    parts: list[dict[str, object]] = [audio_part(audio)] if audio is not None else []
    parts.append({"type": "text", "text": question})
    return ask_parts(server, parts)


def answer(server: LiveServer, audio: bytes | None) -> str:
    return ask(server, audio).choices[0].message.content or ""  # type: ignore[attr-defined]


def test_the_model_says_it_takes_audio_not_images(audio_server: LiveServer) -> None:
    props = httpx.get(f"{audio_server.base_url}/props", timeout=10).json()
    assert props["modalities"] == {"vision": False, "audio": True}
    card = audio_server.client().models.list().data[0]
    assert card.meta["modalities"] == {"vision": False, "audio": True}  # type: ignore[attr-defined]
    assert audio_server.stats()["model"]["audio"] is True


def test_the_answer_depends_on_the_clip_and_tokens_are_counted(audio_server: LiveServer) -> None:
    answers = {k: answer(audio_server, clip(k)) for k in ("low", "high", "noise")}
    assert len(set(answers.values())) >= 2, answers
    assert answer(audio_server, clip("low")) == answers["low"]
    # the same sound at another rate and in stereo: resampled and mixed down, so close to
    # the same input; asked again it is still a valid answer (no error)
    assert answer(audio_server, clip("low", rate=44100, channels=2))
    text_only = ask(audio_server, None).usage  # type: ignore[attr-defined]
    with_clip = ask(audio_server, clip("noise", seconds=0.5)).usage  # type: ignore[attr-defined]
    assert with_clip.prompt_tokens >= text_only.prompt_tokens + TOKENS_PER_CLIP


def test_a_repeated_clip_is_a_cache_hit(audio_server: LiveServer) -> None:
    sound = clip("high", seconds=0.7)
    before = audio_server.stats()["media"]
    ask(audio_server, sound, "Transcribe.")
    again = ask(audio_server, sound, "Transcribe!").usage  # type: ignore[attr-defined]
    assert again.prompt_tokens_details.cached_tokens >= TOKENS_PER_CLIP
    after = audio_server.stats()["media"]
    assert after["images_encoded"] == before["images_encoded"] + 1


def test_llama_servers_completion_takes_audio_in_multimodal_data(
    audio_server: LiveServer,
) -> None:
    prompt = {"prompt_string": f"{MARKER}Say it.", "multimodal_data": [b64(clip("low"))]}
    r = httpx.post(
        f"{audio_server.base_url}/completion",
        json={"prompt": prompt, "n_predict": 4, "temperature": 0},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.json()["tokens_evaluated"] >= TOKENS_PER_CLIP


def _broken_clips() -> list[bytes]:
    good = clip("noise", seconds=0.3)
    rng = random.Random(7)
    out = [good[:n] for n in (12, 44, 45, 100)]
    for _ in range(12):
        data = bytearray(good)
        for _ in range(8):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        out.append(bytes(data))
    return out


def test_broken_clips_are_a_clear_400_or_read_and_the_server_goes_on(
    audio_server: LiveServer,
) -> None:
    """Truncated and bit-flipped WAV files: each is refused with a 400 or (a flip inside the
    samples) read as other sound; never a crash or a hang."""
    for data in _broken_clips():
        body = {
            "model": "any",
            "max_tokens": 2,
            "messages": [{"role": "user", "content": [audio_part(data)]}],
        }
        r = httpx.post(f"{audio_server.base_url}/v1/chat/completions", json=body, timeout=120)
        assert r.status_code in (200, 400), r.text
        if r.status_code == 400:
            assert r.json()["error"]["type"] == "invalid_request_error"
    assert answer(audio_server, clip("low"))


@pytest.mark.parametrize(
    ("part", "words"),
    [
        (audio_part(b"not a wav at all"), "not a WAV file"),
        (audio_part(clip("low"), "flac"), "not supported"),
        ({"type": "input_audio", "input_audio": {"data": "@@", "format": "wav"}}, "base64"),
        ({"type": "image_url", "image_url": {"url": data_url(picture("red-square"))}}, "no images"),
    ],
)
def test_what_the_model_cannot_hear_is_a_400(
    audio_server: LiveServer, part: dict[str, object], words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        audio_server.client().chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": [part]}],  # type: ignore[list-item,misc]
            max_tokens=2,
        )
    assert words in info.value.message


def test_audio_to_a_model_without_audio_is_a_400(vlm_server: LiveServer) -> None:
    with pytest.raises(openai.BadRequestError, match="takes no audio"):
        vlm_server.client().chat.completions.create(
            model="any",
            messages=[{"role": "user", "content": [audio_part(clip("low"))]}],  # type: ignore[list-item,misc]
            max_tokens=2,
        )
