"""Crafted and damaged GGUF files: the header reader fails with one GGUFFormatError, fast.

A file in the models folder can be anything: an interrupted copy, a disk error, a file
made to crash readers. Whatever it holds, reading its header, describing it for the
library and estimating its fit must either succeed or raise a GGUFFormatError (a
HubError for the fit), within bounded time and memory: no RecursionError, MemoryError,
TypeError, struct.error or an endless loop.

The bases are the real SmolLM2 header (truncations) and the same header with its long
arrays cut to 300 items (bit flips: every flip needs a full parse, which the 49k-token
vocabulary would make slow; the layout is otherwise the real one).
"""

from __future__ import annotations

import random
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from backend.fit.errors import FitError
from backend.fit.fit_estimate import estimate_fit
from backend.fit.fit_settings import FitSettings
from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import (
    GGUFHeader,
    GGUFIncompleteError,
    GGUFTruncatedError,
    parse_gguf_header,
    read_gguf_header,
)
from tests.hub.gguf_writer import U64, shrink_arrays, tiny_llama, write_gguf

_STRING, _ARRAY, _U32 = 8, 9, 4


def _use(header: GGUFHeader) -> None:
    """Everything the library listing and ``models fit`` take from a header."""
    _ = (
        header.architecture,
        header.name,
        header.parameter_count,
        header.tensor_bytes,
        header.bits_per_weight,
        header.context_length,
        header.embedding_length,
        header.file_type_name,
        header.chat_template,
        header.layer_bytes(),
    )
    estimate_fit(header, FitSettings(ctx_size=512))


def _only_format_errors(parse: Callable[[], GGUFHeader]) -> str:
    """Run one parse (and use its result); the outcome's name, failing on any other error."""
    try:
        header = parse()
    except GGUFFormatError:
        return "rejected"
    try:
        _use(header)
    except (GGUFFormatError, FitError):  # a bad file, or a fit refused for a reason it names
        return "refused"
    return "read"


@pytest.fixture(scope="module")
def real_header(smollm2_path: Path) -> tuple[bytes, int]:
    """SmolLM2's header bytes (up to its data section) and its file size."""
    header = read_gguf_header(smollm2_path)
    with smollm2_path.open("rb") as fh:
        return fh.read(header.data_offset), header.file_size


@pytest.fixture(scope="module")
def lite_header(smollm2_path: Path) -> tuple[bytes, int]:
    """SmolLM2's header with arrays of at most 300 items, and the size of such a file."""
    head, data_size = shrink_arrays(smollm2_path, 300)
    return head, len(head) + data_size


def test_the_bases_read_and_fit(lite_header: tuple[bytes, int]) -> None:
    head, size = lite_header
    header = parse_gguf_header(head, "lite.gguf", file_size=size)
    assert header.architecture == "llama" and len(header.tensors) == 272
    assert _only_format_errors(lambda: header) == "read"


def test_truncation_at_every_offset_of_the_first_kilobytes(
    real_header: tuple[bytes, int], lite_header: tuple[bytes, int]
) -> None:
    head, _ = real_header
    start = time.perf_counter()
    for cut in range(4096):  # magic, counts, general.* and the start of the vocabulary
        with pytest.raises(GGUFFormatError):
            parse_gguf_header(head[:cut], "cut.gguf", file_size=cut)
    lite, _ = lite_header
    rng = random.Random(8)
    for cut in sorted(rng.sample(range(4096, len(lite)), 300)):  # arrays, tensor infos
        with pytest.raises(GGUFFormatError):
            parse_gguf_header(lite[:cut], "cut.gguf", file_size=cut)
    for cut in (len(head) // 3, len(head) - 1):  # inside the real vocabulary, tensor infos
        with pytest.raises(GGUFFormatError):
            parse_gguf_header(head[:cut], "cut.gguf", file_size=cut)
    assert time.perf_counter() - start < 10


def test_a_prefix_is_truncated_but_a_short_file_is_incomplete(
    real_header: tuple[bytes, int],
) -> None:
    """A prefix fetched remotely may be extended (GGUFTruncatedError); a whole file that
    ends early may not (the Hub code fetches more only on GGUFTruncatedError)."""
    head, size = real_header
    with pytest.raises(GGUFTruncatedError):
        parse_gguf_header(head[:5000], "prefix.gguf", file_size=size)
    with pytest.raises(GGUFIncompleteError, match="truncated"):
        parse_gguf_header(head[:5000], "short.gguf", file_size=5000)


def test_tensor_data_cut_off_is_not_a_model(smollm2_path: Path, tmp_path: Path) -> None:
    """A file shorter than its tensors (an interrupted copy) is incomplete, not 'fits'."""
    header = read_gguf_header(smollm2_path)
    rng = random.Random(9)
    cuts = [header.data_offset, header.data_offset + 1, header.file_size - 1]
    cuts += rng.sample(range(header.data_offset, header.file_size), 5)
    with smollm2_path.open("rb") as fh:
        for cut in cuts:
            fh.seek(0)
            cut_file = tmp_path / "cut.gguf"
            cut_file.write_bytes(fh.read(cut))
            with pytest.raises(GGUFIncompleteError, match=r"truncated.*tensor data"):
                read_gguf_header(cut_file)
    head, _ = shrink_arrays(smollm2_path, 300)
    with pytest.raises(GGUFIncompleteError):  # the same, from a remote prefix and its size
        parse_gguf_header(head, "remote.gguf", file_size=len(head) + 1000)


def test_random_bit_flips(lite_header: tuple[bytes, int]) -> None:
    head, size = lite_header
    rng = random.Random(14)
    infos_from = len(head) - 272 * 40  # about where the tensor infos start
    outcomes: dict[str, int] = {}
    start = time.perf_counter()
    for i in range(600):
        data = bytearray(head)
        # a third in the counts and general.*, a third in the tensor infos, a third anywhere
        region = (0, 2048) if i % 3 == 0 else (infos_from, len(head)) if i % 3 == 1 else None
        for _ in range(rng.choice((1, 1, 2, 3))):
            pos = rng.randrange(*region) if region else rng.randrange(len(head))
            data[pos] ^= 1 << rng.randrange(8)
        flipped = bytes(data)
        outcome = _only_format_errors(
            lambda flipped=flipped: parse_gguf_header(flipped, "flip.gguf", file_size=size)
        )
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert time.perf_counter() - start < 10
    assert outcomes.get("rejected", 0) > 50 and outcomes.get("read", 0) > 50, outcomes


def test_every_metadata_value_read_as_every_type(lite_header: tuple[bytes, int]) -> None:
    """A flipped value type makes the rest of the entry mean something else: a context
    length that is an array, an alignment that is a float, a block count that is a string."""
    head, size = lite_header
    keys = parse_gguf_header(head, "lite.gguf", file_size=size).metadata
    outcomes: dict[str, int] = {}
    for key in keys:
        at = _first_value_of(head, key.encode())
        for value_type in (*range(13), 13, 2**31):
            data = head[:at] + struct.pack("<I", value_type) + head[at + 4 :]
            outcome = _only_format_errors(
                lambda data=data: parse_gguf_header(data, "typed.gguf", file_size=size)
            )
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("rejected", 0) > 100 and outcomes.get("read", 0) > 50, outcomes


_LLAMA = "llama"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("general.alignment", 0),
        ("general.alignment", 48),
        ("general.alignment", "32"),
        ("general.alignment", 0.5),
        ("general.architecture", 7),
        ("general.file_type", "Q4_0"),
        ("general.file_type", -1),
        (f"{_LLAMA}.block_count", U64(2**40)),
        (f"{_LLAMA}.block_count", "4"),
        (f"{_LLAMA}.block_count", [4, 4]),
        (f"{_LLAMA}.block_count", -4),
        (f"{_LLAMA}.context_length", "8192"),
        (f"{_LLAMA}.context_length", [8192]),
        (f"{_LLAMA}.embedding_length", 1.5e30),
        (f"{_LLAMA}.embedding_length", -256),
        (f"{_LLAMA}.attention.head_count", "16"),
        (f"{_LLAMA}.attention.head_count", [-16]),
        (f"{_LLAMA}.attention.head_count", [[16]]),
        (f"{_LLAMA}.attention.head_count_kv", -1),
        (f"{_LLAMA}.attention.key_length", float("nan")),
        (f"{_LLAMA}.feed_forward_length", ["768"]),
        (f"{_LLAMA}.vocab_size", float("inf")),
    ],
)
def test_well_formed_entries_of_the_wrong_type_or_range(
    tmp_path: Path, key: str, value: object
) -> None:
    """Crafted on purpose: every byte is well formed, a value is absurd."""
    path = tiny_llama(tmp_path / "odd.gguf", n_layer=2)
    header = read_gguf_header(path)
    metadata = {k: v for k, v in header.metadata.items() if k != key}
    metadata[key] = value
    tensors = {
        t.name: (list(t.shape), "f32" if t.type.name == "F32" else "f16") for t in header.tensors
    }
    write_gguf(path, metadata, tensors)
    assert _only_format_errors(lambda: read_gguf_header(path)) in ("rejected", "refused")


def _with_u64_at(head: bytes, offset: int, value: int) -> bytes:
    return head[:offset] + struct.pack("<Q", value) + head[offset + 8 :]


def _first_value_of(head: bytes, key: bytes) -> int:
    """The offset of the value type of ``key``'s metadata entry."""
    return head.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, 2**32, 10**12])
def test_huge_counts_and_lengths(lite_header: tuple[bytes, int], value: int) -> None:
    head, size = lite_header
    tokens = _first_value_of(head, b"tokenizer.ggml.tokens")
    token_type = _first_value_of(head, b"tokenizer.ggml.token_type")
    name = _first_value_of(head, b"general.name")
    crafted = {
        "n_tensors": _with_u64_at(head, 8, value),
        "n_kv": _with_u64_at(head, 16, value),
        "first key length": _with_u64_at(head, 24, value),
        "a string length": _with_u64_at(head, name + 4, value),
        "a string array length": _with_u64_at(head, tokens + 8, value),
        "a numeric array length": _with_u64_at(head, token_type + 8, value),
    }
    for what, data in crafted.items():
        start = time.perf_counter()
        with pytest.raises(GGUFFormatError) as caught:
            parse_gguf_header(data, "huge.gguf", file_size=size)
        assert not isinstance(caught.value, GGUFTruncatedError), what  # nothing to fetch
        assert time.perf_counter() - start < 0.5, what


def _nested_array_gguf(depth: int, innermost: bytes = struct.pack("<IQ", _U32, 0)) -> bytes:
    key = b"crafted.nested"
    body = struct.pack("<IQ", _ARRAY, 1) * (depth - 1) + innermost
    return (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<I", _ARRAY)
        + body
    )


@pytest.mark.parametrize("depth", [30, 1_000, 5_000])
def test_deeply_nested_arrays_are_refused_not_recursed(depth: int) -> None:
    data = _nested_array_gguf(depth)
    with pytest.raises(GGUFFormatError, match="nested"):
        parse_gguf_header(data, "nested.gguf")


def test_shallow_nested_arrays_still_read() -> None:
    inner = struct.pack("<IQ", _U32, 2) + struct.pack("<II", 7, 8)
    header = parse_gguf_header(_nested_array_gguf(2, inner), "nested.gguf")
    assert header.get("crafted.nested") == [[7, 8]]


def test_arrays_of_many_empty_arrays_are_summarised() -> None:
    n = 100_000
    inner = struct.pack("<IQ", _U32, 0) * n
    key = b"crafted.many"
    data = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<IIQ", _ARRAY, _ARRAY, n)
        + inner
    )
    header = parse_gguf_header(data, "many.gguf")
    value = header.get("crafted.many")
    assert not isinstance(value, list) and value.length == n
