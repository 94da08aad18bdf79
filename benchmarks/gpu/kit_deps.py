"""The kit's ``deps`` step (stdlib only): install the carried wheels, and check that every
requirement of each carried wheel is either carried too or in the GPU image.

GPU: ``pip install --no-index --no-deps --target WORK/site`` with the image's Python.
Dry run: the same install with a local ``python3.12`` when there is one (it proves the wheels
install for 3.12; the dry run itself uses the .venv), else the coverage check alone.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from benchmarks.gpu.carry_wheels import GPU_IMAGE_HAS, normalise
from benchmarks.gpu.kit_env import KitPaths

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode("utf-8", errors="replace")
    return [
        ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("Requires-Dist:")
    ]


def _applies(requirement: str) -> bool:
    """True when the requirement holds on CPython 3.12 / Linux without extras."""
    if ";" not in requirement:
        return True
    marker = requirement.split(";", 1)[1]
    if "extra" in marker:
        return False
    try:
        from packaging.markers import Marker
    except ImportError:
        return True
    env = {
        "python_version": "3.12",
        "python_full_version": "3.12.3",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "platform_machine": "x86_64",
    }
    return bool(Marker(marker).evaluate(env))


def coverage(wheels: list[Path]) -> dict[str, list[str]]:
    """Wheel -> requirements neither carried nor in the image (empty when complete)."""
    carried = {normalise(w.name.split("-")[0]) for w in wheels}
    have = carried | GPU_IMAGE_HAS
    missing: dict[str, list[str]] = {}
    for wheel in wheels:
        for req in _requires(wheel):
            match = _NAME.match(req)
            if match and _applies(req) and normalise(match.group(1)) not in have:
                missing.setdefault(wheel.name, []).append(req)
    return missing


def _install(python: str, wheels: list[Path], target: Path, timeout: float) -> tuple[int, str]:
    if target.exists():
        shutil.rmtree(target)
    cmd = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--disable-pip-version-check",
        "--target",
        str(target),
        *map(str, wheels),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return res.returncode, (res.stderr or res.stdout).strip()[-800:]


def python312() -> str | None:
    """A Python 3.12 that runs here (a pyenv shim may exist without its version selected)."""
    candidates = [shutil.which("python3.12")]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))]
    for candidate in filter(None, candidates):
        res = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
            capture_output=True,
            text=True,
        )
        if res.returncode == 0 and res.stdout.strip() == "True":
            return candidate
    return None


def install_and_check(paths: KitPaths, timeout: float) -> dict[str, Any]:
    wheels = sorted((paths.carry / "wheels").glob("*.whl"))
    if not wheels:
        return {"ok": False, "error": "no wheels carried: run benchmarks/gpu/prepare.sh"}
    missing = coverage(wheels)
    out: dict[str, Any] = {"wheels": len(wheels), "requirements_not_covered": missing}
    if paths.dry_run:
        py312 = python312()
        if py312 is None:
            out["install"] = "skipped: no python3.12 here (the dry run uses the .venv)"
            rc = 0
        else:
            rc, err = _install(py312, wheels, paths.work / "site-py312-check", timeout)
            out["install"] = f"python3.12 --target: exit {rc}" + (f": {err}" if rc else "")
    else:
        rc, err = _install(str(paths.python), wheels, paths.site, timeout)
        out["install"] = f"pip --target {paths.site.name}: exit {rc}" + (f": {err}" if rc else "")
    out["ok"] = rc == 0 and not missing
    if not out["ok"]:
        out["error"] = "wheel install failed" if rc else f"requirements not covered: {missing}"
    return out
