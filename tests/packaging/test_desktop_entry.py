"""The .desktop template and the per-user installer (run against a stand-in bundle folder)."""

from __future__ import annotations

import configparser
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "assets" / "quantdesk.desktop"
INSTALLER = ROOT / "packaging" / "install-desktop-entry.sh"


def _entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def test_template_fields() -> None:
    entry = _entry(TEMPLATE)
    assert entry["Type"] == "Application"
    assert entry["Name"] == "QuantDesk"
    assert entry["Exec"] == "quantdesk"
    assert entry["Icon"] == "quantdesk"
    assert entry["Categories"] == "Development;Utility;"
    assert (ROOT / "assets" / "icons" / f"{entry['Icon']}.svg").is_file()


def test_installer_points_the_entry_at_the_bundle_and_uninstalls(tmp_path: Path) -> None:
    bundle = tmp_path / "opt" / "quantdesk"
    bundle.mkdir(parents=True)
    exe = bundle / "quantdesk"
    exe.write_text("#!/bin/sh\necho stand-in\n")
    exe.chmod(0o755)
    home = tmp_path / "home"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    subprocess.run([str(INSTALLER), str(bundle)], env=env, check=True, capture_output=True)
    apps = home / ".local" / "share" / "applications"
    entry = _entry(apps / "quantdesk.desktop")
    assert entry["Exec"] == f'"{exe}"' and entry["TryExec"] == str(exe)
    assert entry["Name"] == "QuantDesk" and entry["Icon"] == "quantdesk"
    icon = home / ".local" / "share" / "icons" / "hicolor" / "scalable" / "apps" / "quantdesk.svg"
    assert icon.read_bytes() == (ROOT / "assets" / "icons" / "quantdesk.svg").read_bytes()
    link = home / ".local" / "bin" / "quantdesk"
    assert subprocess.run([str(link)], capture_output=True, text=True).stdout == "stand-in\n"

    missing = subprocess.run(
        [str(INSTALLER), str(tmp_path / "nope")], env=env, capture_output=True, text=True
    )
    assert missing.returncode != 0 and "make package" in missing.stderr

    subprocess.run([str(INSTALLER), "--uninstall"], env=env, check=True, capture_output=True)
    assert not (apps / "quantdesk.desktop").exists() and not icon.exists()
    assert not link.exists() and not link.is_symlink()
