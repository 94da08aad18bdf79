"""Copy-paste snippets that point other tools at the running server."""

from __future__ import annotations

import json


def openai_python(base: str, model: str, api_key: str) -> str:
    key = api_key or "not-needed"
    return (
        "from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{base}/v1", api_key="{key}")\n'
        "stream = client.chat.completions.create(\n"
        f'    model="{model}",\n'
        '    messages=[{"role": "user", "content": "Hello!"}],\n'
        "    stream=True,\n"
        ")\n"
        "for chunk in stream:\n"
        '    print(chunk.choices[0].delta.content or "", end="", flush=True)\n'
    )


def curl(base: str, model: str, api_key: str) -> str:
    auth = f'  -H "Authorization: Bearer {api_key}" \\\n' if api_key else ""
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Hello!"}]})
    return (
        f"curl {base}/v1/chat/completions \\\n"
        '  -H "Content-Type: application/json" \\\n'
        f"{auth}"
        f"  -d '{body}'\n"
    )


def continue_config(base: str, model: str, api_key: str) -> str:
    """A model entry for Continue's ``config.yaml`` (VS Code / JetBrains)."""
    lines = [
        "models:",
        f"  - name: {model} (QuantDesk)",
        "    provider: openai",
        f"    model: {model}",
        f"    apiBase: {base}/v1",
    ]
    if api_key:
        lines.append(f"    apiKey: {api_key}")
    lines.append("    roles: [chat, edit, autocomplete]")
    return "\n".join(lines) + "\n"


SNIPPETS = (("OpenAI SDK", openai_python), ("curl", curl), ("Continue", continue_config))
