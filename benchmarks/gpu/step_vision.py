"""Step: image input on the GPU (issue 30). The tiny VLM of ``benchmarks/tiny_vlm.py`` with
Gemma 3's real vision tower (``--vision gemma3``: SigLIP-so400m shape, 896 px, 256 image
tokens, random weights) is built with the image's PyTorch, then served with every layer
and the projector on the GPU: VRAM with and without the projector (NVML, whole device),
and ``benchmarks.image_input``'s pass (encode time per image, TTFT cold and repeated, the
stall of a concurrent text stream).

    python -m benchmarks.gpu.step_vision --threads T [--vision gemma3] [--gpu]
"""

from __future__ import annotations

import argparse
import subprocess
import time
from typing import Any

from benchmarks import image_input
from benchmarks.gpu.kit_env import KitPaths
from benchmarks.gpu.step_common import nvml_device, nvml_used, run_step
from benchmarks.peer_servers import Knobs, ServerSpec, shared_flags, started


def main() -> dict[str, Any]:
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--vision", default="gemma3")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--images", type=int, default=4)
    p.add_argument("--stream-tokens", type=int, default=400)
    args = p.parse_args()
    paths = KitPaths.from_env()
    folder = paths.models / f"vlm-{args.vision}"
    t = time.perf_counter()
    build = [str(paths.python), "-m", "benchmarks.tiny_vlm", str(folder)]
    build += [
        "--vision",
        args.vision,
        "--converter",
        str(paths.llama_src / "convert_hf_to_gguf.py"),
    ]
    subprocess.run(build, check=True, env=paths.plain_env(), cwd=paths.root)
    build_s = time.perf_counter() - t
    model, mmproj = folder / "model.gguf", folder / "mmproj.gguf"
    knobs = Knobs(model, args.threads, 4, 8192, 512, 512)
    ngl = ["-ngl", "99" if args.gpu else "0"]

    def spec(projector: list[str]) -> ServerSpec:
        def argv(k: Knobs, port: int) -> list[str]:
            head = paths.quantdesk("serve", "--model", str(k.model), *projector, *ngl)
            return head + shared_flags(k, port)

        return ServerSpec("ours", argv, cwd=paths.root)

    handle = nvml_device()
    idle = nvml_used(handle)
    with started(spec(["--no-mmproj"]), knobs, paths.logs / "vision-text.log", 300):
        text_only = nvml_used(handle)
    with started(spec(["--mmproj", str(mmproj)]), knobs, paths.logs / "vision.log", 300) as (
        url,
        _proc,
    ):
        with_projector = nvml_used(handle)
        one = image_input.one_pass(url, argparse.Namespace(**vars(args)), 0)
    vram = None
    if idle is not None and text_only is not None and with_projector is not None:
        vram = {
            "text_only_mib": round((text_only - idle) / 2**20),
            "with_projector_mib": round((with_projector - idle) / 2**20),
            "projector_mib": round((with_projector - text_only) / 2**20),
        }
    return {
        "ok": True,
        "vision": args.vision,
        "build_s": round(build_s, 1),
        "mmproj_mib": round(mmproj.stat().st_size / 2**20),
        "vram": vram,
        "encode_ms_avg": round(one["encode_ms_avg_cumulative"], 1),
        "ttft_cold_s": one["ttft_cold_s"],
        "ttft_repeat_s": one["ttft_repeat_s"],
        "image_tokens": one["prompt_tokens"],
        "stream_gap_max_during_s": one["stream_gap_max_during_s"],
        "stream_gap_median_before_s": one["stream_gap_median_before_s"],
    }


if __name__ == "__main__":
    raise SystemExit(run_step(main))
