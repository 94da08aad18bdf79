"""--insecure warns, a blank --api-key is refused, /health with a key keeps the model's
name to clients that send the key (issue 14)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from backend.core.errors import ConfigError
from backend.server.runner import check_bind_policy
from backend.settings import ServerSettings
from tests.server.conftest import start_server, wait_healthy

CLI = [sys.executable, "-m", "backend.entrypoints.main"]


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "serve", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QUANTDESK_MODEL": "default"},
    )


def test_insecure_bind_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        check_bind_policy(ServerSettings(host="0.0.0.0", insecure=True))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "no API key" in warnings[0].getMessage() and "0.0.0.0" in warnings[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # nothing to warn about
        check_bind_policy(ServerSettings(host="0.0.0.0", api_key="k", insecure=True))
        check_bind_policy(ServerSettings(host="127.0.0.1", insecure=True))
    assert not caplog.records
    with pytest.raises(ConfigError, match="--api-key"):
        check_bind_policy(ServerSettings(host="0.0.0.0"))


def test_serve_insecure_warns_on_stderr(tmp_path: Path) -> None:
    """As a user sees it; the model is not a GGUF, so the server stops at once."""
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"not a gguf" * 10)
    r = _serve("--model", str(fake), "--host", "0.0.0.0", "--port", "0", "--insecure")
    assert r.returncode != 0
    assert "WARNING" in r.stderr and "no API key" in r.stderr, r.stderr


def test_blank_api_key_is_refused() -> None:
    r = _serve("--api-key", " ", "--port", "0")
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("quantdesk: error: invalid --api-key") and "blank" in last
    for key in ("", "\t \n"):
        with pytest.raises(ValidationError, match="blank"):
            ServerSettings(api_key=key)
    assert ServerSettings(api_key=" s3cret\n").api_key == "s3cret"  # compared stripped


def test_health_with_a_key_names_no_model_without_it() -> None:
    server = start_server(api_key="s3cret", ctx_size=512, parallel=1)
    try:
        wait_healthy(server.base_url)
        anonymous = httpx.get(f"{server.base_url}/health", timeout=30)
        assert anonymous.status_code == 200  # open: load balancers probe it
        assert anonymous.json() == {"status": "ok"}
        assert "SmolLM2" not in anonymous.text and "gguf" not in anonymous.text.lower()
        wrong = httpx.get(
            f"{server.base_url}/health", headers={"Authorization": "Bearer nope"}, timeout=30
        )
        assert wrong.json() == {"status": "ok"}
        known = httpx.get(
            f"{server.base_url}/health", headers={"Authorization": "Bearer s3cret"}, timeout=30
        )
        assert known.json() == {"status": "ok", "model": "SmolLM2-135M-Instruct"}
    finally:
        server.handle.stop()
