"""Can Qt open a window here? Checked before the ``QApplication`` exists.

On a fresh Debian 12 or Ubuntu with X, PySide6 >= 6.5's xcb platform plugin needs
``libxcb-cursor0``, ``libxcb-icccm4`` and ``libxcb-keysyms1``; without them Qt prints
only "could not load the Qt platform plugin xcb" and aborts the process, so nothing
can be caught afterwards. :func:`display_problem` reads which shared libraries the
plugin needs (the ``DT_NEEDED`` entries of its ELF files), tries to load each one the
way the dynamic loader would, and names the packages that are missing in one line
with the ``apt install`` that fixes it.

Nothing here imports Qt's GUI modules; the paths come from ``QLibraryInfo``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

# Debian/Ubuntu package of each library the xcb plugin links to (both distributions name
# them alike); other names follow Debian's rule: lib name + SONAME version.
PACKAGES: dict[str, str] = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb.so.1": "libxcb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libGL.so.1": "libgl1",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
}
# The three that PySide6 >= 6.5 added and fresh installs lack: always named in the README.

_DT_NEEDED = 1
_SHT_DYNAMIC = 6


def package_for(soname: str) -> str:
    """The Debian/Ubuntu package that ships ``soname`` (by table, else by Debian's rule)."""
    if soname in PACKAGES:
        return PACKAGES[soname]
    name, _, version = soname.partition(".so")
    version = version.lstrip(".").split(".")[0]
    name = name.lower()
    if not version:
        return name
    return f"{name}-{version}" if name[-1].isdigit() else f"{name}{version}"


def needed_libraries(path: Path) -> list[str]:
    """The ``DT_NEEDED`` sonames of an ELF shared object (empty if it is not one)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return []
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    try:
        if is64:
            (shoff,) = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        else:
            (shoff,) = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        sections = []
        for i in range(shnum):
            at = shoff + i * shentsize
            if is64:
                _n, stype, _f, _a, off, size, link = struct.unpack_from(end + "IIQQQQI", data, at)
            else:
                _n, stype, _f, _a, off, size, link = struct.unpack_from(end + "IIIIIII", data, at)
            sections.append((stype, off, size, link))
        names: list[str] = []
        for stype, off, size, link in sections:
            if stype != _SHT_DYNAMIC or link >= len(sections):
                continue
            str_off = sections[link][1]
            entry = struct.Struct(end + ("qQ" if is64 else "iI"))
            for at in range(off, off + size, entry.size):
                tag, value = entry.unpack_from(data, at)
                if tag == 0:
                    break
                if tag == _DT_NEEDED:
                    stop = data.index(b"\0", str_off + value)
                    names.append(data[str_off + value : stop].decode("ascii", "replace"))
        return names
    except (struct.error, ValueError, IndexError):
        log.debug("could not read the ELF dynamic section of %s", path)
        return []


def can_load(soname: str) -> bool:
    """Whether the dynamic loader finds and loads ``soname`` (as Qt's plugin would)."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def qt_paths() -> tuple[Path, Path]:
    """Qt's plugins folder and its own libraries folder (bundled or in the venv)."""
    from PySide6.QtCore import QLibraryInfo

    plugins = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath))
    libs = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.LibrariesPath))
    return plugins, libs


def missing_xcb_libraries(
    plugins: Path,
    libs: Path,
    load: Callable[[str], bool] | None = None,
    bundled: Iterable[Path] = (),
) -> list[str]:
    """Sonames the xcb plugin (and Qt's xcb library) need that cannot be loaded.

    Libraries found in Qt's own folder (or a ``bundled`` one) count as present; the
    rest must load through ``load``. An unreadable or absent plugin gives no verdict
    (an empty list): Qt will then say what it says.
    """
    plugin = plugins / "platforms" / "libqxcb.so"
    needed = needed_libraries(plugin)
    if not needed:
        return []
    qpa = next((libs / n for n in needed if n.startswith("libQt6XcbQpa")), None)
    if qpa is not None:
        needed += needed_libraries(qpa)
    load = load or can_load
    folders = [libs, *bundled]
    missing: list[str] = []
    for soname in dict.fromkeys(needed):
        if any((folder / soname).exists() for folder in folders):
            continue
        if not load(soname):
            missing.append(soname)
    return missing


def wants_xcb(env: Mapping[str, str]) -> bool:
    """Whether Qt will pick the xcb plugin for the window in this environment."""
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform.split(";")[0].split(":")[0] == "xcb"
    return bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def describe_missing(missing: list[str], debian_like: bool = True) -> str:
    """The one line printed for ``missing`` sonames."""
    packages = list(dict.fromkeys(package_for(s) for s in missing))
    command = "sudo apt install " + " ".join(packages)
    how = (
        f"install them with: {command}"
        if debian_like
        else f"install the packages that provide them (Debian/Ubuntu: {command})"
    )
    return (
        f"quantdesk: error: Qt cannot open a window: missing {', '.join(missing)} "
        f"({', '.join(packages)}); {how}"
    )


def display_problem(
    env: Mapping[str, str] | None = None,
    load: Callable[[str], bool] | None = None,
    platform: str | None = None,
) -> str | None:
    """The line to print when Qt's xcb plugin cannot load here, else None.

    Only on Linux: with no display at all, or when Qt will use xcb (``QT_QPA_PLATFORM``
    is xcb, or unset with ``DISPLAY`` set and no Wayland session) and cannot load it.
    """
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux"):
        return None
    if not any(env.get(k) for k in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")):
        return (
            "quantdesk: error: there is no display to open a window on (DISPLAY and "
            "WAYLAND_DISPLAY are unset); run it in a desktop session, or `quantdesk "
            "serve` for the server alone"
        )
    if not wants_xcb(env):
        return None
    plugins, libs = qt_paths()
    bundled = [Path(sys._MEIPASS)] if hasattr(sys, "_MEIPASS") else []  # a PyInstaller bundle
    missing = missing_xcb_libraries(plugins, libs, load, bundled)
    if not missing:
        return None
    debian_like = Path("/etc/debian_version").exists()
    return describe_missing(missing, debian_like)
