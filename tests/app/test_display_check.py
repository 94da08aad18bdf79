"""Before any window: a missing xcb library is one line with the apt command, not a Qt abort.

The plugin's dependencies are read from the real PySide6 files; only what the loader
finds is injected, so the logic under test is the real one on controlled inputs.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

import app.display_check as display_check
from app.display_check import (
    display_problem,
    missing_xcb_libraries,
    needed_libraries,
    package_for,
    qt_paths,
    wants_xcb,
)

FRESH_DEBIAN_LACKS = {"libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"}
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xcb is Linux's")


def _fresh_debian(soname: str) -> bool:
    """A loader that finds everything but the three libraries PySide6 6.5 started needing."""
    return soname not in FRESH_DEBIAN_LACKS


@linux_only
def test_reads_the_real_plugins_dependencies() -> None:
    plugins, libs = qt_paths()
    needed = needed_libraries(plugins / "platforms" / "libqxcb.so")
    assert any(n.startswith("libQt6XcbQpa") for n in needed)
    qpa = next(n for n in needed if n.startswith("libQt6XcbQpa"))
    assert set(needed_libraries(libs / qpa)) >= FRESH_DEBIAN_LACKS
    assert needed_libraries(Path(__file__)) == []  # not an ELF file: no verdict


@linux_only
def test_a_fresh_debian_gets_the_apt_line() -> None:
    line = display_problem(env={"DISPLAY": ":0"}, load=_fresh_debian, platform="linux")
    assert line is not None and "\n" not in line
    assert line.startswith("quantdesk: error: Qt cannot open a window: missing ")
    for soname in FRESH_DEBIAN_LACKS:
        assert soname in line
    assert (
        line.endswith("sudo apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1")
        or "(Debian/Ubuntu: sudo apt install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1)" in line
    )


@linux_only
def test_nothing_missing_or_no_xcb_means_no_complaint() -> None:
    assert display_problem(env={"DISPLAY": ":0"}, load=lambda _s: True, platform="linux") is None
    # Qt will not use xcb: offscreen, Wayland, or another OS
    for env in (
        {"QT_QPA_PLATFORM": "offscreen"},
        {"QT_QPA_PLATFORM": "wayland"},
        {"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"},
    ):
        assert display_problem(env=env, load=_fresh_debian, platform="linux") is None, env
    assert display_problem(env={"DISPLAY": ":0"}, load=_fresh_debian, platform="darwin") is None
    assert (
        display_problem(env={"QT_QPA_PLATFORM": "xcb"}, load=_fresh_debian, platform="linux")
        is not None
    )
    assert wants_xcb({"QT_QPA_PLATFORM": "xcb:display=:1"})


@linux_only
def test_no_display_at_all_is_said_too() -> None:
    line = display_problem(env={}, load=_fresh_debian, platform="linux")
    assert line is not None and "no display" in line and "quantdesk serve" in line


@linux_only
def test_bundled_libraries_count_as_present(tmp_path: Path) -> None:
    plugins, libs = qt_paths()
    for soname in FRESH_DEBIAN_LACKS:
        (tmp_path / soname).write_bytes(b"")
    assert missing_xcb_libraries(plugins, libs, _fresh_debian, [tmp_path]) == []
    assert set(missing_xcb_libraries(plugins, libs, _fresh_debian)) == FRESH_DEBIAN_LACKS


def test_package_names_follow_debian() -> None:
    assert package_for("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert package_for("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
    assert package_for("libxcb-ewmh.so.2") == "libxcb-ewmh2"  # not in the table: the rule
    assert package_for("libfoo2.so.1") == "libfoo2-1"


@linux_only
def test_this_machine_is_judged_by_what_really_loads() -> None:
    """The real check on the real machine: what it calls missing really does not load."""
    plugins, libs = qt_paths()
    missing = missing_xcb_libraries(plugins, libs)
    for soname in missing:
        with pytest.raises(OSError):
            ctypes.CDLL(soname)
    assert not any(s.startswith("libQt6") for s in missing)  # Qt's own are bundled
    line = display_problem(env={"DISPLAY": ":0"}, platform="linux")
    assert (line is None) == (not missing)
    # and the way the tests themselves run Qt needs none of it
    assert display_problem(env={"QT_QPA_PLATFORM": "offscreen"}) is None


@linux_only
def test_main_prints_one_line_and_exits_before_any_window(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app import main as app_main

    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.setattr(display_check, "can_load", _fresh_debian)
    monkeypatch.setattr(app_main, "create_app", lambda *a: pytest.fail("a window was made"))
    assert app_main.main() == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sudo apt install libxcb-cursor0" in err
