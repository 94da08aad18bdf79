"""Where the kit's files are, and the environment its child processes run with (stdlib only).

GPU mode: the image's ``python3`` (PyTorch, transformers), the carried wheels installed into
``WORK/site`` and put first on ``PYTHONPATH`` for quantdesk's processes only (the image's
transformers keeps its own huggingface_hub). Dry run: this checkout's ``.venv``. Both: the
carried ``llama_cpp`` package (``CARRY/pypkg``) over the libraries of the kit's own build
(``LLAMA_CPP_LIB_PATH``), and a private ``QUANTDESK_HOME``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULT_PREFIX = "KIT-RESULT "


@dataclass(frozen=True)
class KitPaths:
    root: Path
    carry: Path
    build: Path
    work: Path
    out: Path
    python: Path
    dry_run: bool

    @property
    def llama_src(self) -> Path:
        return self.carry / "llama.cpp"

    @property
    def lib_dir(self) -> Path:
        return self.build / "bin"

    @property
    def llama_server(self) -> Path:
        return self.build / "bin" / "llama-server"

    @property
    def site(self) -> Path:
        return self.work / "site"

    @property
    def models(self) -> Path:
        return self.work / "models"

    @property
    def logs(self) -> Path:
        return self.work / "logs"

    def model(self, quant: str) -> Path:
        return self.models / f"synth-{quant}.gguf"

    def quantdesk_env(self) -> dict[str, str]:
        """For ``python -m backend.entrypoints.main ...`` and the step modules."""
        env = dict(os.environ)
        paths = [self.carry / "pypkg", self.root]
        if not self.dry_run:
            paths.insert(0, self.site)
        old = env.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), *([old] if old else [])])
        env["LLAMA_CPP_LIB_PATH"] = str(self.lib_dir)
        env["QUANTDESK_HOME"] = str(self.work / "home")
        env["HF_HUB_OFFLINE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env["QD_GPU_KIT_PATHS"] = self.to_json()
        return env

    def plain_env(self) -> dict[str, str]:
        """For the converter and the synthetic model: the image's own packages."""
        env = dict(os.environ)
        env["HF_HUB_OFFLINE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = str(self.root)
        env["QD_GPU_KIT_PATHS"] = self.to_json()
        return env

    def quantdesk(self, *args: str) -> list[str]:
        return [str(self.python), "-m", "backend.entrypoints.main", *args]

    def to_json(self) -> str:
        data = {k: str(v) if isinstance(v, Path) else v for k, v in self.__dict__.items()}
        return json.dumps(data)

    @classmethod
    def from_env(cls) -> KitPaths:
        """In a step's child process: the paths the kit passed down."""
        data = json.loads(os.environ["QD_GPU_KIT_PATHS"])
        return cls(
            **{k: (v if k == "dry_run" else Path(v)) for k, v in data.items()}  # type: ignore[arg-type]
        )


def default_paths(out: Path, dry_run: bool) -> KitPaths:
    env = os.environ.get
    carry = Path(env("QD_GPU_CARRY", str(ROOT / "build" / "gpu-carry")))
    build = Path(env("QD_GPU_BUILD", str(ROOT / "build" / "gpu-kit" / "llama-build")))
    work = Path(env("QD_GPU_WORK", str(ROOT / "build" / "gpu-kit" / "work")))
    python = Path(sys.executable)  # run.sh starts the kit with the Python it chose
    return KitPaths(ROOT, carry, build, work, out, python, dry_run)


def emit(result: dict[str, object]) -> None:
    """A step's one answer to the kit: the last line of its stdout."""
    sys.stdout.write(RESULT_PREFIX + json.dumps(result, default=str) + "\n")
    sys.stdout.flush()
