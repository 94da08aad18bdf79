"""``quantdesk serve`` as users run it: flags, one-line errors, a real child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.server.conftest import child_base_url, wait_healthy

HTTP = httpx.Client(timeout=120.0)

CLI = [sys.executable, "-m", "backend.entrypoints.main"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QUANTDESK_MODEL": "default"},
    )


def test_bad_flags_give_one_line_and_nonzero_exit() -> None:
    r = _run("serve", "--ctx-size", "10")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("quantdesk: error: invalid --ctx-size")
    r = _run("serve", "--model", "/nonexistent/model.gguf")
    assert r.returncode != 0
    assert "model file not found" in r.stderr
    r = _run("serve", "--host", "0.0.0.0")
    assert r.returncode == 2 and "--api-key" in r.stderr
    r = _run("serve", "-fa", "maybe")
    assert r.returncode == 2


def test_not_a_gguf_fails_cleanly(tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"this is not a gguf file" * 10)
    r = _run("serve", "--model", str(fake), "--port", "0")
    assert r.returncode != 0
    assert "could not load" in r.stderr.splitlines()[-1]


def test_serve_child_process_answers(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            *CLI,
            "serve",
            "-m",
            "default",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "-c",
            "1024",
            "-np",
            "2",
            "-t",
            "2",
            "-ctk",
            "q8_0",
            "-ctv",
            "q8_0",
            "-fa",
            "on",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = child_base_url(proc, port_file)
        wait_healthy(base)
        r = HTTP.post(
            f"{base}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8},
            timeout=60,
        )
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
        stats = HTTP.get(f"{base}/v1/stats").json()
        assert stats["model"]["cache_type_k"] == "q8_0"
        # q8_0: 34 bytes per 32 values
        assert stats["kv"]["bytes_total"] == round(1024 * 30 * 192 * 2 * 34 / 32)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
