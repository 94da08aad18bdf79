"""One size formatter, IEC units as llama.cpp prints them."""

from __future__ import annotations

from backend.core.units import human_bytes


def test_sizes_are_binary_units() -> None:
    assert human_bytes(None) == "?"
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(10 << 20) == "10.0 MiB"
    assert human_bytes(int(4.5 * (1 << 30))) == "4.5 GiB"
    assert human_bytes(3 << 40) == "3.0 TiB"
