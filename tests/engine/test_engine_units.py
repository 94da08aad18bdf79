"""Pure-Python parts of the engine: stop strings across pieces and KV cell accounting."""

from __future__ import annotations

from backend.engine.kv_accounting import KvAccounting
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


def test_kv_accounting_shares_copied_prefixes() -> None:
    kv = KvAccounting(1000)
    kv.extend(0, 100)
    kv.copy_prefix(0, 1, 60)  # splits seq 0's segment
    kv.extend(1, 10)
    assert kv.used == 110
    kv.copy_prefix(1, 2, 30)
    assert kv.used == 110
    kv.remove(0)  # cells 60..99 of seq 0 are freed, 0..59 still shared
    assert kv.used == 70
    kv.truncate(1, 20)
    assert kv.used == 30  # 0..29 held by seq 2, seq 1 keeps 0..19
    kv.remove(2)
    assert kv.used == 20 and kv.length(1) == 20
    kv.remove(1)
    assert kv.used == 0


def test_a_character_cut_off_by_the_end_is_dropped_not_replaced() -> None:
    d = StopDetector([])
    tree = "🌲".encode()
    assert d.feed(b"ok " + tree[:2]) == "ok "
    assert d.flush() == ""
    held = StopDetector(["STOP"])
    assert held.feed(b"S" + tree[:1]) == ""
    assert held.flush() == "S"
