"""Image input (issue 30): what an image costs and what a repeated one saves.

On a vision model (default: the tiny VLM of ``benchmarks/tiny_vlm.py``, built into a temp
folder) served by ``quantdesk serve -m MODEL --mmproj MMPROJ``, per pass:

- **cold**: ``--images`` requests, each with a picture never sent before (TTFT, and the
  server's vision-encoder time per image from ``/v1/stats``);
- **repeat**: the same requests again, the same pictures and text (the prefix cache holds
  them: TTFT, cached tokens);
- **stall**: text answers stream one after another (``--stream-tokens`` each,
  ``ignore_eos``) while ``--images`` fresh image requests arrive together; the longest and
  the median gap between two chunks while they run, against the median gap before.

The figures are timings on a shared machine: run ``--passes`` of them and read the spread.

    .venv/bin/python -m benchmarks.image_input --passes 3 --out benchmarks/results/image-input
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from backend.system.cpu_name import cpu_model
from benchmarks.peer_servers import VENV_BIN, Knobs, ServerSpec, shared_flags, started
from benchmarks.tiny_vlm import build_tiny_vlm


def picture(seed: int, size: int = 256) -> bytes:
    """A distinct PNG per ``seed`` (coloured blocks)."""
    img = Image.new("RGB", (size, size))
    px = img.load()
    assert px is not None
    for y in range(size):
        for x in range(size):
            k = (x // 32 + y // 32 + seed) % 7
            px[x, y] = ((37 * k + seed) % 256, (91 * k + 3 * seed) % 256, (53 * k) % 256)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _body(image: bytes | None, text: str, max_tokens: int, stream: bool) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if image is not None:
        url = "data:image/png;base64," + base64.b64encode(image).decode()
        parts.append({"type": "image_url", "image_url": {"url": url}})
    parts.append({"type": "text", "text": text})
    return {
        "model": "any",
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
        "stream_options": {"include_usage": True},
    }


def ttft(url: str, image: bytes | None, text: str) -> tuple[float, dict[str, Any]]:
    """Seconds to the first streamed chunk with content, and the usage."""
    t0 = time.perf_counter()
    first: float | None = None
    usage: dict[str, Any] = {}
    body = _body(image, text, 4, True)
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            chunk = json.loads(line[5:])
            if (
                first is None
                and chunk.get("choices")
                and chunk["choices"][0]["delta"].get("content")
            ):
                first = time.perf_counter() - t0
            usage = chunk.get("usage") or usage
    return (first if first is not None else time.perf_counter() - t0), usage


@dataclass
class StreamGaps:
    """Gaps between the chunks of text answers streamed back to back: before the image
    requests came, and while they ran (a gap across two answers is not counted)."""

    images_in: threading.Event = field(default_factory=threading.Event)
    images_done: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    before: list[float] = field(default_factory=list)
    during: list[float] = field(default_factory=list)

    def run(self, url: str, n_tokens: int) -> None:
        body = _body(None, "Tell me a long story about a lighthouse.", n_tokens, True)
        body["ignore_eos"] = True
        while not self.images_done.is_set():
            last: float | None = None
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
                r.raise_for_status()
                for line in r.iter_lines():
                    if not (line.startswith("data:") and '"content"' in line):
                        continue
                    now = time.perf_counter()
                    if last is not None:
                        if self.images_done.is_set():
                            break
                        (self.during if self.images_in.is_set() else self.before).append(now - last)
                    last = now
                    if len(self.before) >= 100:
                        self.ready.set()


def one_pass(url: str, args: argparse.Namespace, base_seed: int) -> dict[str, Any]:
    before = httpx.get(f"{url}/v1/stats", timeout=10).json()["media"]
    text = "Describe this picture in one word."
    images = [picture(base_seed + i) for i in range(args.images)]
    cold = [ttft(url, img, text) for img in images]
    after = httpx.get(f"{url}/v1/stats", timeout=10).json()["media"]
    repeat = [ttft(url, img, text) for img in images]
    text_only = [ttft(url, None, text + f" ({i})")[0] for i in range(args.images)]

    fresh = [picture(base_seed + 1000 + i) for i in range(args.images)]
    gaps = StreamGaps()
    streamer = threading.Thread(target=gaps.run, args=(url, args.stream_tokens))
    streamer.start()
    if not gaps.ready.wait(timeout=300):
        raise RuntimeError("the text stream did not start")
    t_in = time.perf_counter()
    gaps.images_in.set()
    senders = [threading.Thread(target=ttft, args=(url, img, text)) for img in fresh]
    for s in senders:
        s.start()
    for s in senders:
        s.join()
    t_out = time.perf_counter()
    gaps.images_done.set()
    streamer.join()
    during = gaps.during or [0.0]
    encoded = after["images_encoded"] - before["images_encoded"]
    return {
        "encode_ms_avg_cumulative": after["encode_ms_avg"],
        "images_encoded_cold": encoded,
        "ttft_cold_s": [round(t, 4) for t, _ in cold],
        "ttft_repeat_s": [round(t, 4) for t, _ in repeat],
        "ttft_text_only_s": [round(t, 4) for t in text_only],
        "prompt_tokens": cold[0][1].get("prompt_tokens"),
        "cached_tokens_repeat": [
            (u.get("prompt_tokens_details") or {}).get("cached_tokens") for _, u in repeat
        ],
        "stream_gap_median_before_s": round(statistics.median(gaps.before), 5),
        "stream_gap_median_during_s": round(statistics.median(during), 5),
        "stream_gap_max_during_s": round(max(during), 4),
        "stream_chunks_during": len(gaps.during),
        "images_window_s": round(t_out - t_in, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path)
    p.add_argument("--mmproj", type=Path)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--images", type=int, default=4)
    p.add_argument("--stream-tokens", type=int, default=2000, help="per streamed answer")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=8192, help="-c: room for a long --stream-tokens")
    p.add_argument("--parallel", type=int, default=4)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/image-input"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="image-input-") as tmp:
        if args.model is None or args.mmproj is None:
            args.model, args.mmproj = build_tiny_vlm(Path(tmp) / "tiny-vlm")
        knobs = Knobs(args.model, args.threads, args.parallel, args.ctx, 512, 512)

        def argv(k: Knobs, port: int) -> list[str]:
            head = [str(VENV_BIN / "python"), "-m", "backend.entrypoints.main", "serve"]
            head += ["--model", str(k.model), "--mmproj", str(args.mmproj)]
            return head + shared_flags(k, port)

        spec = ServerSpec("ours", argv)
        passes = []
        for i in range(args.passes):
            with started(spec, knobs, Path(tmp) / f"serve-{i}.log", 300) as (url, _proc):
                passes.append(one_pass(url, args, 100 * i))
            print(json.dumps(passes[-1]))
    record = {
        "model": args.model.name,
        "mmproj": args.mmproj.name,
        "cpu": cpu_model(),
        "threads": args.threads,
        "ctx": args.ctx,
        "parallel": args.parallel,
        "stream_tokens": args.stream_tokens,
        "images": args.images,
        "passes": passes,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"image-input-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(record, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
