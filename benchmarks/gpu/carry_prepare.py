"""Write the folder a GPU machine needs (``benchmarks/gpu/prepare.sh`` calls this).

    build/gpu-carry/
      llama.cpp/      trimmed source of the llama.cpp our pinned llama-cpp-python vendors
                      (with convert_hf_to_gguf.py, conversion/ and gguf-py/)
      pypkg/llama_cpp the llama_cpp Python package, without libraries (built there)
      wheels/         Python 3.12 manylinux wheels the GPU image lacks (carry_wheels)
      manifest.json   versions, what was dropped, wheel plan, sizes

Prints the carry size; fails when it is over the limit.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from benchmarks.gpu import carry_source, carry_wheels

log = logging.getLogger("gpu-kit.prepare")

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
LIMIT_MIB = 60


def sdist_tree(peer_dir: Path, pip: list[str]) -> Path:
    """The unpacked llama-cpp-python sdist (the one build_llama_server.sh uses, fetched with
    ``pip download`` when it is not there yet)."""
    tree = peer_dir / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}"
    if (tree / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        return tree
    sdist_dir = peer_dir / "sdist"
    tarball = sdist_dir / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    if not tarball.is_file():
        sdist_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                *pip,
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
                "-d",
                str(sdist_dir),
            ],
            check=True,
        )
    with tarfile.open(tarball) as tar:
        tar.extractall(peer_dir, filter="data")
    return tree


def copy_python_package(sdist: Path, dest: Path) -> None:
    """The pure-Python ``llama_cpp`` package; ``LLAMA_CPP_LIB_PATH`` points it at the
    libraries built on the GPU machine."""
    target = dest / "llama_cpp"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(
        sdist / "llama_cpp", target, ignore=shutil.ignore_patterns("lib", "__pycache__", "*.so*")
    )


def mib(n: int) -> float:
    return round(n / 2**20, 2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-carry")
    p.add_argument("--peer-dir", type=Path, default=ROOT / "build" / "peers")
    p.add_argument("--no-wheels", action="store_true", help="skip the pip download")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    pip = [sys.executable, "-m", "pip"]
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    sdist = sdist_tree(args.peer_dir, pip)
    src = sdist / "vendor" / "llama.cpp"
    log.info("trimming %s", src.relative_to(ROOT) if src.is_relative_to(ROOT) else src)
    dropped = carry_source.copy_trimmed(src, out / "llama.cpp")
    carry_source.apply_patches(out / "llama.cpp")  # our wheel's fixes (the AMX tile config)
    copy_python_package(sdist, out / "pypkg")

    wheel_plan = carry_wheels.plan(Path(sys.executable), ROOT)
    failed: dict[str, str] = {}
    wheels = out / "wheels"
    if not args.no_wheels:
        if wheels.exists():
            shutil.rmtree(wheels)
        carry = wheel_plan["carry"]
        assert isinstance(carry, dict)
        log.info("downloading %d wheels for Python 3.12 (manylinux x86-64)", len(carry))
        failed = carry_wheels.download(carry, wheels, pip)
    sizes = {
        "llama.cpp": carry_source.tree_bytes(out / "llama.cpp"),
        "pypkg": carry_source.tree_bytes(out / "pypkg"),
        "wheels": carry_source.tree_bytes(wheels) if wheels.exists() else 0,
    }
    total = sum(sizes.values())
    manifest = {
        "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
        "dropped_from_llama_cpp": dropped,
        "wheel_plan": wheel_plan,
        "wheels": carry_wheels.wheel_names(wheels) if wheels.exists() else {},
        "wheels_failed": failed,
        "sizes_mib": {k: mib(v) for k, v in sizes.items()},
        "total_mib": mib(total),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    total += (out / "manifest.json").stat().st_size
    parts = ", ".join(f"{k} {mib(v)} MiB" for k, v in sizes.items())
    sys.stdout.write(f"carry: {out} = {mib(total)} MiB ({parts}); limit {LIMIT_MIB} MiB\n")
    if failed:
        sys.stdout.write(f"wheels that could not be downloaded: {', '.join(failed)}\n")
    if total > LIMIT_MIB * 2**20:
        sys.stdout.write("carry is over the limit\n")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
