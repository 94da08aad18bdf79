"""Images in the token stream: placeholder ids, the step plan around them, prefix matches
that never end inside an image (no model: the engine's pure parts)."""

from __future__ import annotations

import numpy as np
import pytest

from backend.engine.admission import Admission, UnifiedAdmission
from backend.engine.media.media_errors import MediaError
from backend.engine.media.media_span import (
    MediaSpan,
    placeholder_ids,
    position_at,
    whole_media_prefix,
)
from backend.engine.media.projector_loading import batched_media
from backend.engine.sequence import Sequence
from backend.engine.step_planner import plan_step
from tests.engine.scheduling_fakes import RecordingKv, decode, make_seq

N_IMG = 16


def with_image(text_before: list[int], digest: str, text_after: list[int]) -> Sequence:
    ids = placeholder_ids(digest, N_IMG)
    seq = make_seq(text_before + ids + text_after)
    span = MediaSpan(len(text_before), N_IMG, digest, np.zeros((N_IMG, 8), np.float32))
    seq.media = [span]
    return seq


def test_placeholder_ids_name_the_image_and_no_vocabulary_token() -> None:
    a, b = placeholder_ids("ab" * 32, N_IMG), placeholder_ids("cd" * 32, N_IMG)
    assert a == placeholder_ids("ab" * 32, N_IMG)  # the same picture: the same tokens
    assert a[0] != b[0]  # another picture differs at its first position
    assert len(set(a)) == N_IMG and all(-(2**31) <= t < 0 for t in a + b)


def test_a_shared_prefix_is_cut_back_to_the_start_of_an_image_it_ends_inside() -> None:
    span = MediaSpan(10, N_IMG, "ab" * 32, np.zeros((N_IMG, 8), np.float32))
    assert whole_media_prefix([span], 9) == 9
    assert whole_media_prefix([span], 10) == 10
    assert whole_media_prefix([span], 17) == 10
    assert whole_media_prefix([span], 26) == 26  # the whole image


def test_text_stops_where_an_image_starts_and_the_image_is_a_call_of_its_own() -> None:
    seq = with_image(list(range(100, 130)), "ab" * 32, list(range(200, 210)))
    seq.seq_id = 0
    other = make_seq(list(range(300, 380)))
    other.seq_id = 1
    kv = RecordingKv(4096)
    for per_slot in (False, True):
        seq.n_past = other.n_past = 0
        plan = plan_step([seq, other], n_batch=512, per_slot=per_slot)
        assert (seq, 30) in [item for call in plan.calls for item in call]
    first = plan_step([seq, other], n_batch=512, per_slot=True)
    decode(kv, first)
    assert seq.n_past == 30
    second = plan_step([seq], n_batch=512, per_slot=True)
    assert second.calls == [[(seq, N_IMG)]]  # the whole image, alone
    decode(kv, second)
    third = plan_step([seq], n_batch=512, per_slot=True)
    assert third.calls == [[(seq, 10)]]


def test_an_image_waits_for_a_step_with_room_for_all_of_it() -> None:
    seq = with_image([1, 2], "ab" * 32, [3, 4])
    seq.seq_id, seq.n_past = 0, 2
    assert plan_step([seq], n_batch=N_IMG - 1, per_slot=False).calls == []
    assert plan_step([seq], n_batch=N_IMG, per_slot=False).calls == [[(seq, N_IMG)]]


def test_a_cached_prompt_with_another_image_reuses_only_the_text_before_it() -> None:
    kv = RecordingKv(4096)
    policy = UnifiedAdmission(kv, n_seq_max=4, parallel=2, cache_entries=2)
    running: list[Sequence] = []
    before, after = list(range(100, 140)), list(range(200, 220))
    first = with_image(before, "ab" * 32, after)
    assert policy.admit(first, running) is Admission.ADMITTED
    while first.remaining > 1:
        decode(kv, plan_step(running, n_batch=512, per_slot=False))
    running.remove(first)
    policy.retire(first)

    same = with_image(before, "ab" * 32, [*after, 5, 6])
    assert policy.admit(same, running) is Admission.ADMITTED
    assert same.cached_tokens == len(before) + N_IMG + len(after)  # the image reused
    running.remove(same)
    policy.retire(same)

    # another picture whose placeholder ids happen to share the first few positions with
    # the cached one (as a hash collision would): the match still stops at the image
    other = with_image(before, "cd" * 32, after)
    other.tokens[len(before) : len(before) + 3] = first.tokens[len(before) : len(before) + 3]
    other.prompt_array = np.asarray(other.tokens, dtype=np.int32)
    assert policy.admit(other, running) is Admission.ADMITTED
    assert other.cached_tokens == len(before)


def test_a_causal_span_longer_than_a_batch_is_decoded_in_batch_sized_pieces() -> None:
    """Audio (750 positions a clip) and causal images: pieces of one batch, in order,
    covering the span's positions and embeddings exactly; a non-causal image must fit."""
    embd = np.arange(750 * 4, dtype=np.float32).reshape(750, 4)
    clip = MediaSpan(10, 750, "cd" * 32, embd)
    pieces = batched_media([clip], 800, n_batch=512, n_ubatch=256, scored=False)
    assert [(p.start, p.n_tokens) for p in pieces] == [(10, 512), (522, 238)]
    assert np.array_equal(np.concatenate([p.embd for p in pieces]), embd)
    image = MediaSpan(10, 300, "ab" * 32, embd[:300], non_causal=True)
    with pytest.raises(MediaError, match="micro-batch"):
        batched_media([image], 800, n_batch=512, n_ubatch=256, scored=False)
    assert batched_media([image], 800, n_batch=512, n_ubatch=512, scored=False) == [image]


def mrope_span(start: int, nx: int, ny: int) -> MediaSpan:
    """An image placed with M-RoPE as libmtmd places Qwen2-VL's: ``nx`` x ``ny`` tokens
    that share their time position and take ``max(nx, ny)`` positions."""
    n = nx * ny
    rows, cols = np.divmod(np.arange(n, dtype=np.int32), nx)
    rel = np.stack([np.zeros(n, np.int32), rows, cols, np.zeros(n, np.int32)])
    moves = np.repeat(np.array([[1], [1], [1], [0]], np.int32), n, axis=1)
    span = MediaSpan(start, n, "ab" * 32, np.zeros((n, 8), np.float32))
    span.n_pos, span.rel_pos, span.moves = max(nx, ny), rel, moves
    return span


def test_with_m_rope_an_image_takes_fewer_positions_than_cells() -> None:
    plain = MediaSpan(3, N_IMG, "ab" * 32, np.zeros((N_IMG, 8), np.float32))
    assert [position_at([plain], i) for i in (0, 3, 10, 19, 25)] == [0, 3, 10, 19, 25]
    grid = mrope_span(3, 4, 2)  # 8 tokens at positions 3.., text after them at 3 + 4
    assert [position_at([grid], i) for i in (0, 2, 3, 11, 12)] == [0, 2, 3, 7, 8]
    assert position_at([grid], 6) == 3  # inside the image: its first position
    second = mrope_span(13, 2, 3)  # 6 tokens, 3 positions
    assert position_at([grid, second], 13) == 9 and position_at([grid, second], 20) == 13
    sections = grid.sections(3)
    assert sections is not None and sections.shape == (4, 8)
    assert sections[0].tolist() == [3] * 8  # time: one position for the whole image
    assert sections[1].tolist() == [3, 3, 3, 3, 4, 4, 4, 4]  # rows
    assert sections[2].tolist() == [3, 4, 5, 6] * 2  # columns
    assert sections[3].tolist() == [0] * 8
    assert plain.sections(3) is None


def test_an_m_rope_image_longer_than_a_batch_is_cut_into_pieces_of_one_position() -> None:
    """Its pieces start from the image's first position (their sections stay relative to
    it), only the last advances, and no prefix ends between them."""
    grid = mrope_span(2, 8, 8)  # 64 tokens, 8 positions
    pieces = batched_media([grid], 80, n_batch=24, n_ubatch=8, scored=False)
    assert [(p.start, p.n_tokens, p.advance) for p in pieces] == [
        (2, 24, 0),
        (26, 24, 0),
        (50, 16, 8),
    ]
    assert [position_at(pieces, p.start) for p in pieces] == [2, 2, 2]
    assert position_at(pieces, 66) == position_at([grid], 66) == 10
    whole = grid.sections(2)
    assert whole is not None
    parts = [p.sections(2) for p in pieces]
    assert np.array_equal(np.concatenate([q for q in parts if q is not None], axis=1), whole)
    assert [whole_media_prefix(pieces, n) for n in (2, 26, 40, 50, 66)] == [2, 2, 2, 2, 66]
    plain = MediaSpan(2, 64, "cd" * 32, np.zeros((64, 8), np.float32))  # one position a token
    assert [whole_media_prefix(plain.pieces(24), n) for n in (26, 40)] == [26, 26]
