"""``quantdesk serve`` as users run it: flags, one-line errors, a real child process."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from backend.entrypoints.main import build_parser
from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import settings_argv, settings_from_args
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
            "-nr",
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
        # -nr: llama-server's --no-repack, weights unpacked whatever this CPU could take
        assert stats["model"]["cpu_path"] == "plain"
        cpu_path = HTTP.get(f"{base}/props").json()["cpu_path"]
        assert cpu_path["use_extra_bufts"] is False and "--no-repack" in cpu_path["reason"]
        # q8_0: 34 bytes per 32 values
        assert stats["kv"]["bytes_total"] == round(1024 * 30 * 192 * 2 * 34 / 32)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _parse_serve(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(["serve", *argv])


def test_generated_command_line_parses_back_to_the_same_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in os.environ if n.startswith("QUANTDESK_")]:
        monkeypatch.delenv(name)
    engine = EngineSettings(
        model="/models/x.gguf",
        ctx_size=1024,
        batch_size=256,
        ubatch_size=128,
        parallel=2,
        gpu_layers=7,
        cache_type_k="q8_0",
        cache_type_v="q4_0",
        flash_attn="on",
        threads=3,
        kv_unified=True,
        no_repack=True,
        prefix_cache_entries=0,
        cache_ram=512,
        cache_disk=0,
        model_alias="x",
        chat_template_file="/templates/t.jinja",
        threads_batch=5,
        max_queue=9,
        seed=42,
        spec_type="ngram-simple,draft-simple",
        spec_ngram_simple_size_n=4,
        spec_ngram_simple_size_m=24,
        spec_ngram_simple_min_hits=2,
        spec_ngram_simple_size_n_min=3,
        spec_draft_policy="full",
        model_draft="/models/draft.gguf",
        draft_max=8,
        draft_min=1,
        draft_p_min=0.5,
        gpu_layers_draft=3,
        rpc="10.0.0.2:50052,10.0.0.3:50052",
        tensor_split="3,1",
        split_mode="row",
        mmproj="/models/mmproj-F16.gguf",
        no_mmproj=True,
        media_max_images=3,
        media_max_mib=2.5,
        media_max_pixels=1000,
        allow_remote_media=True,
        media_path="/media",
        pooling="none",
    )
    server = ServerSettings(
        host="0.0.0.0",
        port=0,
        cors_origins=["*", "http://a"],
        api_key="-key-that-looks-like-a-flag",
        allowed_hosts=["a.local", "b.local"],
        insecure=True,
        max_tokens_limit=77,
        strict_max_tokens=True,
        max_body_bytes=4096,
        max_choices=2,
        max_embedding_inputs=3,
        responses_store_mib=5,
        reasoning_format="none",
        keep_billing_header=True,
        port_file="/tmp/port",
        slot_save_path="/slots",
        ollama_port=11434,
    )
    # --context-shift takes a KV stream per slot: the same flags but -kvu, with it
    shifting = EngineSettings(**{**engine.model_dump(), "kv_unified": False, "context_shift": True})
    # every flag is exercised: no field keeps its default
    for settings, allowed in ((engine, {"context_shift"}), (server, set())):
        model = type(settings)
        same = [n for n in model.model_fields if getattr(settings, n) == getattr(model(), n)]
        assert set(same) <= allowed, same
    for settings in (engine, shifting):
        args = _parse_serve([*settings_argv(settings), *settings_argv(server)])
        assert settings_from_args(EngineSettings, args) == settings
        assert settings_from_args(ServerSettings, args) == server
    defaults = _parse_serve([*settings_argv(EngineSettings()), *settings_argv(ServerSettings())])
    assert settings_from_args(EngineSettings, defaults) == EngineSettings()
    assert settings_from_args(ServerSettings, defaults) == ServerSettings()
    assert "--gpu-layers=-1" in settings_argv(EngineSettings())  # not read as an option
