"""Pure-Python parts of the engine: stop strings across pieces."""

from __future__ import annotations

from backend.engine.stop_detector import StopDetector


def test_stop_string_split_across_pieces_is_withheld() -> None:
    d = StopDetector(["</end>"])
    out = d.feed(b"hello </") + d.feed(b"en") + d.feed(b"d> more")
    assert out == "hello "
    assert d.stopped


def test_false_alarm_is_released() -> None:
    d = StopDetector(["STOP"])
    assert d.feed(b"ST") == ""
    assert d.feed(b"ART") == "START"
    assert d.feed(b" S") == " "
    assert d.flush() == "S"


def test_multibyte_utf8_split_across_tokens() -> None:
    d = StopDetector([])
    euro = "€".encode()
    assert d.feed(euro[:1]) == ""
    assert d.feed(euro[1:]) == "€"


def test_a_character_cut_off_by_the_end_is_dropped_not_replaced() -> None:
    d = StopDetector([])
    tree = "🌲".encode()
    assert d.feed(b"ok " + tree[:2]) == "ok "
    assert d.flush() == ""
    held = StopDetector(["STOP"])
    assert held.feed(b"S" + tree[:1]) == ""
    assert held.flush() == "S"
