"""Deterministic synthetic prompts of a fixed length.

Each word comes from a list of common English words that byte-pair tokenizers
(GPT-2, Llama, SmolLM2, Qwen, ...) encode as one token with its leading space,
so ``n`` words are close to ``n`` tokens. The server's reported
``usage.prompt_tokens`` gives the exact figure, which the results record.
"""

from __future__ import annotations

import random

_WORD_TEXT = (
    "the of and to in is was for on that with as by at from his her are be this had not but "
    "have which they one were all their there been has more when who will would can said "
    "about out into than them time some could only other new these two may first then do "
    "any like my now over such our man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people "
    "how too little state good very make world still own see men work long get here between "
    "both life being under never day same another know while last might us great old year off "
    "come since against go came right used take three house use during without again place "
    "around however home small found thought went say part once high general upon school every "
    "does got united left number course war until always away something fact though water less "
    "public put think almost hand enough far took head yet government system better set told "
    "nothing night end why called eyes find going look asked later knew point next program city "
    "business give group toward young days let room side social present given several order "
    "national second possible rather per face among form important often things looked early "
    "white case john become large big need four within felt along children saw best church ever "
    "least power development light thing seemed family interest want members mind country area "
    "others done turned although open problem sense service certain kind began thus help means"
)
_WORDS = tuple(_WORD_TEXT.split())


def synthetic_text(n_tokens: int, seed: int | str) -> str:
    """About ``n_tokens`` tokens of reproducible word salad for ``seed``."""
    rng = random.Random(str(seed))
    words = [rng.choice(_WORDS) for _ in range(max(0, n_tokens))]
    return " ".join(words)


def shared_prefix(n_tokens: int, tag: str) -> str:
    """A system prompt of about ``n_tokens`` tokens, identical for every request with ``tag``."""
    if n_tokens <= 0:
        return ""
    head = "You are a helpful assistant. Background notes follow."
    body = synthetic_text(max(0, n_tokens - 8), f"prefix:{tag}")
    return f"{head} {body}"


def request_prompt(n_tokens: int, request_key: str) -> str:
    """The distinct part of one request: no two keys share more than a token or two."""
    return synthetic_text(n_tokens, f"request:{request_key}")
