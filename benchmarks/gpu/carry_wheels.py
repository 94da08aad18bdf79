"""Which Python distributions the GPU machine lacks for ``quantdesk serve`` / ``models fit`` /
``quantize`` / ``compare``, and the ``pip download`` of their wheels for Python 3.12.

What is needed is read off this venv: the modules those commands import (``import_scan``,
run in a child process) mapped to their distributions, at the versions installed here. What
the GPU image has is the package list the device notes give for its 'cuda' image
(``GPU_IMAGE_HAS``); a distribution there is still carried when a version the notes give
breaks one of our requirements (huggingface_hub 1.x there, >= 2.4 here).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

# The modules whose imports define "what quantdesk needs" on the GPU machine.
SCAN_MODULES = (
    "backend.entrypoints.main",
    "backend.entrypoints.serve_cmd",
    "backend.entrypoints.models_cmd",
    "backend.entrypoints.quantize_cmd",
    "backend.entrypoints.compare_cmd",
    "backend.server.runner",
    "backend.server.app_factory",
    "backend.engine.engine",
    "backend.compare.compare",
    "quantize.pipeline",
    "quantize.quantizer",
    "backend.system.system_stats",
    "backend.system.gpu_info",
    "backend.fit.memory_probe",
    "backend.bench",
    "benchmarks.peer_compare",
)
# Imported by uvicorn only at run time (uvicorn[standard] in pyproject).
RUNTIME_EXTRAS = ("httptools", "uvloop", "websockets")

# The 'cuda' image's Python packages (device notes, read 2026-11-17), normalised names.
GPU_IMAGE_HAS = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
    jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator
    lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
    mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx
    ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc
    nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
    nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
    nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
    opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging
    pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache
    protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
    pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
    python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
    scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
    setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate
    tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
    tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
    transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
    wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()  # noqa: SIM905
)
# Versions the device notes name for that image (a 2026-11 pip list), where we have a bound.
GPU_IMAGE_VERSIONS = {"huggingface-hub": "1.33.0", "numpy": "2.5.2", "transformers": "5.17.0"}
# Never carried: the project itself, and the llama_cpp package (carried as source, built there).
NOT_WHEELS = frozenset({"quantdesk", "llama-cpp-python"})

PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_SCAN = """
import importlib, importlib.metadata as md, json, sys
for name in {modules!r}:
    try:
        importlib.import_module(name)
    except Exception as exc:
        print("scan: cannot import", name, exc, file=sys.stderr)
for name in {extras!r}:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
from backend.entrypoints.main import build_parser
for name in {modules!r}[1:5]:
    build_parser(name)
dists = md.packages_distributions()
top = {{m.split(".")[0] for m in sys.modules}}
found = {{}}
for module in sorted(top):
    for dist in dists.get(module, []):
        found[dist] = md.version(dist)
print(json.dumps(found))
"""


def import_scan(python: Path, root: Path) -> dict[str, str]:
    """Distribution -> installed version of every module the quantdesk commands import."""
    code = _SCAN.format(modules=list(SCAN_MODULES), extras=list(RUNTIME_EXTRAS))
    out = subprocess.run(
        [str(python), "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    found: dict[str, str] = json.loads(out.stdout.strip().splitlines()[-1])
    return {normalise(k): v for k, v in found.items()}


def _requirements(python: Path, names: list[str]) -> dict[str, list[str]]:
    """name -> requirement strings on it, from the metadata of ``names`` and quantdesk."""
    code = (
        "import importlib.metadata as md, json, sys\n"
        "out = {}\n"
        "for d in sys.argv[1:]:\n"
        "    try: out[d] = md.requires(d) or []\n"
        "    except md.PackageNotFoundError: pass\n"
        "print(json.dumps(out))"
    )
    res = subprocess.run(
        [str(python), "-c", code, "quantdesk", *names], capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout)


def version_conflicts(python: Path, needed: dict[str, str]) -> dict[str, str]:
    """Image distributions whose known version breaks a requirement of ours: name -> why."""
    from packaging.requirements import Requirement

    out: dict[str, str] = {}
    for req_lists in _requirements(python, list(needed)).values():
        for text in req_lists:
            req = Requirement(text)
            if req.marker is not None and "extra" in str(req.marker):
                continue
            name = normalise(req.name)
            have = GPU_IMAGE_VERSIONS.get(name)
            if name in needed and have and not req.specifier.contains(have, prereleases=True):
                out[name] = f"image has {have}, we need {req.specifier}"
    return out


def plan(python: Path, root: Path) -> dict[str, object]:
    """What to carry: {"carry": {name: version}, "image": [...], "conflicts": {...}}."""
    needed = {k: v for k, v in import_scan(python, root).items() if k not in NOT_WHEELS}
    conflicts = version_conflicts(python, needed)
    carry = {
        name: version
        for name, version in sorted(needed.items())
        if name not in GPU_IMAGE_HAS or name in conflicts
    }
    image = sorted(n for n in needed if n not in carry)
    return {"carry": carry, "image": image, "conflicts": conflicts}


def download(carry: dict[str, str], dest: Path, pip: list[str]) -> dict[str, str]:
    """``pip download`` one wheel per distribution (no dependencies: the plan is complete);
    returns name -> error for those that failed."""
    dest.mkdir(parents=True, exist_ok=True)
    failed: dict[str, str] = {}
    platform_args = [arg for p in PLATFORMS for arg in ("--platform", p)]
    for name, version in carry.items():
        cmd = [
            *pip,
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platform_args,
            "-d",
            str(dest),
            f"{name}=={version}",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            failed[name] = (res.stderr.strip().splitlines() or ["pip failed"])[-1]
            log.warning("no wheel for %s==%s: %s", name, version, failed[name])
    return failed


def wheel_names(folder: Path) -> dict[str, str]:
    """Distribution (normalised) -> wheel file name, for the wheels in ``folder``."""
    out: dict[str, str] = {}
    for wheel in sorted(folder.glob("*.whl")):
        out[normalise(wheel.name.split("-")[0])] = wheel.name
    return out


if __name__ == "__main__":  # print the plan: python -m benchmarks.gpu.carry_wheels
    here = Path(__file__).resolve().parents[2]
    sys.stdout.write(json.dumps(plan(Path(sys.executable), here), indent=2) + "\n")
