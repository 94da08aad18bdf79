"""Measure the bundle: size, and launch-to-first-streamed-token of ``quantdesk serve``.

Usage: ``python packaging/measure_cold_start.py [dist/quantdesk] [--runs N]``. Each run
starts the frozen executable with a bare environment (PATH, HOME, a temp QUANTDESK_HOME),
waits for the port file and /health 200 (polled every 20 ms), streams one chat request
and records the time from launch to the first streamed token.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

log = logging.getLogger("measure_cold_start")
PROMPT = "What is the capital of France? Answer with one word."


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def first_token_s(exe: Path, timeout_s: float = 300.0) -> tuple[float, float, str]:
    """(launch -> /health 200, launch -> first token, answer) for one cold start."""
    tmp = Path(tempfile.mkdtemp(prefix="quantdesk-cold-"))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "QUANTDESK_HOME": str(tmp / "home"),
        "HF_HUB_OFFLINE": "1",
        "LANG": "C.UTF-8",
    }
    port_file = tmp / "port"
    launched = time.monotonic()
    proc = subprocess.Popen(
        [
            str(exe),
            "serve",
            "--model",
            "default",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "-c",
            "1024",
            "-np",
            "1",
        ],
        cwd=tmp,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        healthy = 0.0
        while time.monotonic() - launched < timeout_s:
            if proc.poll() is not None:
                raise RuntimeError(f"bundle exited with {proc.returncode}")
            text = port_file.read_text().strip() if port_file.is_file() else ""
            if text:
                url = f"http://127.0.0.1:{int(text)}"
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        healthy = time.monotonic() - launched
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.02)
        else:
            raise RuntimeError("server not healthy in time")
        body = {
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 16,
            "temperature": 0,
            "stream": True,
        }
        first = 0.0
        pieces: list[str] = []
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as resp:
            for line in resp.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0].get("delta", {}).get("content") or ""
                if delta and not first:
                    first = time.monotonic() - launched
                pieces.append(delta)
        return healthy, first, "".join(pieces)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", nargs="?", type=Path, default=Path("dist/quantdesk"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    exe = (args.bundle / ("quantdesk.exe" if os.name == "nt" else "quantdesk")).resolve()
    size = folder_size(args.bundle)
    log.info("bundle %s: %.0f MiB", args.bundle, size / 2**20)
    for run in range(args.runs):
        healthy, first, answer = first_token_s(exe)
        log.info(
            "run %d: healthy %.2f s, first token %.2f s, answer %r", run + 1, healthy, first, answer
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
