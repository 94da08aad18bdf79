"""The ``ollama`` npm client (installed by ``make install-dev`` into build/npm): it lists
the models and streams a chat, reading our NDJSON as it reads Ollama's."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.ollama.conftest import MODEL
from tests.server.conftest import LiveServer

NPM_DIR = Path(__file__).resolve().parents[2] / "build" / "npm"
SCRIPT = """
import { Ollama } from 'ollama'
const ollama = new Ollama({ host: process.argv[2] })
const list = await ollama.list()
const stream = await ollama.chat({
  model: process.argv[3],
  messages: [{ role: 'user', content: 'Write one sentence about the sea.' }],
  stream: true,
  options: { temperature: 0, seed: 1, num_predict: 12 },
})
let text = ''
let last = null
for await (const part of stream) {
  text += part.message.content
  last = part
}
console.log(JSON.stringify({
  names: list.models.map((m) => m.name), text, done: last.done,
  done_reason: last.done_reason, eval_count: last.eval_count,
}))
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_npm_client_lists_and_streams_a_chat(ollama_server: LiveServer) -> None:
    assert (NPM_DIR / "node_modules" / "ollama").is_dir(), "run make install-dev (npm install)"
    script = NPM_DIR / "ollama_check.mjs"  # beside node_modules, where node resolves 'ollama'
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        ["node", str(script), ollama_server.base_url, MODEL],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["names"] == [f"{MODEL}:latest"]
    assert out["done"] is True and 0 < out["eval_count"] <= 12
    whole = ollama_server.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Write one sentence about the sea."}],
        max_tokens=12,
        temperature=0,
        seed=1,
    )
    assert out["text"] == whole.choices[0].message.content
