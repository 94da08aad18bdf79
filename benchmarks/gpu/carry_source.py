"""The llama.cpp source that llama-cpp-python's sdist vendors, trimmed to a CUDA build of the
shared libraries and ``llama-server`` (plus ``convert_hf_to_gguf.py`` and ``gguf-py``).

Dropped: documentation, test suites, examples, vocab files, media, the web UI's sources (the
server builds without them when ``LLAMA_BUILD_UI`` and ``LLAMA_USE_PREBUILT_UI`` are off) and
the sources of every ggml backend but CPU, CUDA and RPC.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# top-level entries of vendor/llama.cpp that a build (and the converter) never reads
DROP_TOP = frozenset(
    {
        "docs",
        "models",
        "media",
        "tests",
        "examples",
        "pocs",
        "benches",
        "skills",
        "ci",
        "app",
        "grammars",
        "requirements",
        "requirements.txt",
        ".devops",
        ".github",
        "build-xcframework.sh",
        "flake.nix",
        ".git",
    }
)
# ggml backends kept (the rest are optional subdirectories that CMake adds only when enabled)
KEEP_BACKENDS = frozenset({"ggml-cpu", "ggml-cuda", "ggml-rpc"})
# inside tools/: what the build reads nothing of
DROP_TOOLS = (
    "ui/src",
    "ui/tests",
    "ui/static",
    "ui/package-lock.json",
    "server/tests",
    "server/public",
    "server/webui",
    "tuning",
    "mtmd/tests",
)
DROP_ANYWHERE = ("__pycache__",)


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in DROP_ANYWHERE or n.endswith((".pyc", ".gguf"))}


def copy_trimmed(src: Path, dest: Path) -> list[str]:
    """Copy llama.cpp from ``src`` to ``dest`` without what the build doesn't need; returns
    the dropped paths (relative), for the manifest."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    dropped: list[str] = []
    for entry in sorted(src.iterdir()):
        if entry.name in DROP_TOP:
            dropped.append(entry.name)
            continue
        target = dest / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target, ignore=_ignore, symlinks=True)
        else:
            shutil.copy2(entry, target)
    ggml_src = dest / "ggml" / "src"
    for backend in sorted(ggml_src.iterdir()):
        if (
            backend.is_dir()
            and backend.name.startswith("ggml-")
            and backend.name not in KEEP_BACKENDS
        ):
            shutil.rmtree(backend)
            dropped.append(f"ggml/src/{backend.name}")
    for rel in DROP_TOOLS:
        path = dest / "tools" / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            continue
        dropped.append(f"tools/{rel}")
    return dropped


PATCHES = Path(__file__).resolve().parents[2] / "packaging" / "llama-cpp" / "patches"


def apply_patches(llama_cpp_dir: Path) -> None:
    """Our wheel's fixes to the vendored llama.cpp (the AMX tile config: the H200's host is a
    Xeon), so the kit's build runs the kernels QuantDesk users run."""
    for patch in sorted(PATCHES.glob("*.patch")):
        subprocess.run(
            ["patch", "-d", str(llama_cpp_dir), "-p1", "--forward", "--quiet", "-i", str(patch)],
            check=True,
        )


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
