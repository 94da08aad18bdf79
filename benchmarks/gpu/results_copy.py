"""Copy a kit run's output into ``benchmarks/results/`` without machine paths (stdlib only).

    python -m benchmarks.gpu.results_copy OUT_DIR benchmarks/results/gpu-kit-dryrun

Paths under the checkout become ``<repo>/...``, the home folder ``~``, the kit's work folder
``<work>``; the summary is written again from the scrubbed JSON, so the two agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from benchmarks.gpu import kit_summary
from benchmarks.gpu.kit_env import ROOT

FILES = ("gpu_kit.json", "logs.txt", "peer-ratios.png")


def scrubber(work: str | None) -> list[tuple[str, str]]:
    pairs = []
    if work:
        pairs.append((work, "<work>"))
    pairs += [(str(ROOT), "<repo>"), (str(Path.home()), "~")]
    if os.environ.get("TMPDIR"):
        pairs.append((os.environ["TMPDIR"], "<tmp>"))
    return pairs


def scrub(text: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def copy(src: Path, dest: Path, work: str | None = None) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    pairs = scrubber(work)
    written = []
    for name in FILES:
        path = src / name
        if not path.is_file():
            continue
        if name.endswith(".png"):
            shutil.copyfile(path, dest / name)
        else:
            (dest / name).write_text(scrub(path.read_text(errors="replace"), pairs))
        written.append(dest / name)
    data = json.loads((dest / "gpu_kit.json").read_text())
    (dest / "summary.txt").write_text(kit_summary.summary(data), encoding="utf-8")
    return [*written, dest / "summary.txt"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("src", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--work", default=None, help="the kit's work folder, if not under the repo")
    args = p.parse_args(argv)
    for path in copy(args.src, args.dest, args.work):
        sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
