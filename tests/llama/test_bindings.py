"""backend.llama on the real SmolLM2 vocabulary: the log hook's sinks and the token helpers."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

from backend.llama.backend_init import init_llama_backend
from backend.llama.log_hook import LineAssembler, LoggingSink, captured_llama_log, route_llama_log
from backend.llama.tokens import detokenize, token_to_piece, tokenize


def _load_vocab_only(path: Path) -> Any:
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True  # the tokenizer alone: loads in milliseconds, and logs
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model
    return model


@pytest.fixture
def vocab(smollm2_path: Path) -> Iterator[Any]:
    init_llama_backend()
    model = _load_vocab_only(smollm2_path)
    yield llama_cpp.llama_model_get_vocab(model)
    llama_cpp.llama_model_free(model)


def _current_log_callback() -> int:
    callback = llama_cpp.llama_log_callback()
    user_data = ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(callback), ctypes.byref(user_data))
    return ctypes.cast(callback, ctypes.c_void_p).value or 0


def test_tokenize_and_pieces_round_trip_utf8(vocab: Any) -> None:
    text = "Grüße, 世界! naïve café"
    tokens = tokenize(vocab, text.encode(), add_special=False, parse_special=False)
    assert tokens.dtype.name == "int32" and 0 < tokens.size < len(text.encode())
    assert b"".join(token_to_piece(vocab, int(t)) for t in tokens).decode() == text
    with_bos = tokenize(vocab, text.encode(), add_special=True, parse_special=False)
    assert with_bos.tolist()[-tokens.size :] == tokens.tolist()


def test_special_tokens_render_only_when_asked(vocab: Any) -> None:
    eos = int(llama_cpp.llama_vocab_eos(vocab))
    assert token_to_piece(vocab, eos) == b""
    assert token_to_piece(vocab, eos, special=True) == b"<|im_end|>"
    parsed = tokenize(vocab, b"<|im_end|>", add_special=False, parse_special=True)
    assert parsed.tolist() == [eos]


def test_detokenize_round_trips_and_grows_its_buffer(vocab: Any) -> None:
    text = "Grüße, 世界! naïve café"
    tokens = tokenize(vocab, text.encode(), add_special=False, parse_special=False).tolist()
    assert detokenize(vocab, tokens, special=False) == text
    assert detokenize(vocab, [], special=True) == ""
    eos = int(llama_cpp.llama_vocab_eos(vocab))
    # 10 bytes a token against a first buffer of 8 a token: the retry path
    assert detokenize(vocab, [eos] * 10, special=True) == "<|im_end|>" * 10
    assert detokenize(vocab, [eos] * 10, special=False) == ""


def test_captured_log_gets_whole_lines_and_restores_the_previous_logger(
    smollm2_path: Path,
) -> None:
    init_llama_backend()
    before = _current_log_callback()
    lines: list[str] = []
    with captured_llama_log(lines.append):
        llama_cpp.llama_model_free(_load_vocab_only(smollm2_path))
    assert _current_log_callback() == before
    assert any("llama_model_loader" in line for line in lines)
    assert all(line.strip() and "\n" not in line for line in lines)


def test_routed_log_lands_in_the_logger_with_info_as_debug(
    smollm2_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("tests.llama.routed")
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        route_llama_log(logger)
        llama_cpp.llama_model_free(_load_vocab_only(smollm2_path))
    records = [r for r in caplog.records if r.name == logger.name]
    assert any("llama_model_loader" in r.getMessage() for r in records)
    assert {r.levelno for r in records} == {logging.DEBUG}  # a clean load: no warnings


def test_rerouting_swaps_the_sink_under_one_c_callback(
    smollm2_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = logging.getLogger("tests.llama.first")
    second = logging.getLogger("tests.llama.second")
    route_llama_log(first)
    installed = _current_log_callback()
    with caplog.at_level(logging.DEBUG):  # both loggers would be heard
        route_llama_log(second)
        assert _current_log_callback() == installed  # never replaced, so never freed
        with captured_llama_log(lambda _line: None):
            assert _current_log_callback() == installed
        llama_cpp.llama_model_free(_load_vocab_only(smollm2_path))
    assert _current_log_callback() == installed
    names = {r.name for r in caplog.records}
    assert second.name in names and first.name not in names


def test_logging_sink_levels_and_continuations(caplog: pytest.LogCaptureFixture) -> None:
    sink = LoggingSink(logging.getLogger("tests.llama.sink"))
    with caplog.at_level(logging.DEBUG, logger="tests.llama.sink"):
        for level, text in [(2, "info\n"), (3, "careful"), (5, " still careful\n"), (4, "bad\n")]:
            sink(level, text)
        sink(5, "\n")  # an empty continuation logs nothing
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "info"),
        (logging.WARNING, "careful"),
        (logging.WARNING, " still careful"),  # pieces keep their leading space
        (logging.ERROR, "bad"),
    ]


def test_line_assembler_joins_pieces_and_flushes_the_rest() -> None:
    lines: list[str] = []
    assemble = LineAssembler(lines.append)
    for piece in ["[ 1/ 2] blk.0 - [", "4, 4], type = f16,", " converting\n\n", "tail"]:
        assemble(2, piece)
    assert lines == ["[ 1/ 2] blk.0 - [4, 4], type = f16, converting"]
    assemble.flush()
    assert lines[-1] == "tail"
