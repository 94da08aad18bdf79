"""Copy-paste setups for clients with an Ollama provider: Zed, JetBrains AI Assistant,
Continue, Open WebUI and VS Code Copilot. They point at the Ollama URL (port 11434 when
the server answers there, else the main port, which answers Ollama's routes too) and the
model by its Ollama name (``name:latest``). These clients send no API key."""

from __future__ import annotations

import json

NO_KEY = "these clients send no API key: leave the server's key blank"


def ollama_model(model: str) -> str:
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


def zed(base: str, model: str, api_key: str) -> str:
    """Zed's ``settings.json``: its Ollama provider and the model (Zed reads whether it
    takes tools from ``/api/show``'s capabilities)."""
    settings = {
        "language_models": {
            "ollama": {
                "api_url": base,
                "available_models": [
                    {
                        "name": ollama_model(model),
                        "display_name": f"{model} (QuantDesk)",
                        "max_tokens": 8192,
                    }
                ],
            }
        }
    }
    note = f"// Zed settings.json ({NO_KEY})\n" if api_key else "// Zed settings.json\n"
    return note + json.dumps(settings, indent=2) + "\n"


def jetbrains(base: str, model: str, api_key: str) -> str:
    lines = [
        "JetBrains AI Assistant:",
        "  Settings > Tools > AI Assistant > Models > Third-party AI providers",
        "  Provider: Ollama",
        f"  URL: {base}",
        "  Test Connection, then pick the model:",
        f"    {ollama_model(model)}",
    ]
    if api_key:
        lines.append(f"  ({NO_KEY})")
    return "\n".join(lines) + "\n"


def continue_ollama(base: str, model: str, api_key: str) -> str:
    """Continue's ``config.yaml`` with its ``ollama`` provider."""
    lines = [
        "models:",
        f"  - name: {model} (QuantDesk, Ollama API)",
        "    provider: ollama",
        f"    model: {ollama_model(model)}",
        f"    apiBase: {base}",
        "    roles: [chat, edit, apply, autocomplete]",
    ]
    if api_key:
        lines.insert(0, f"# {NO_KEY}")
    return "\n".join(lines) + "\n"


def open_webui(base: str, model: str, api_key: str) -> str:
    """Open WebUI in Docker on the host's network (the Ollama listener is loopback only)."""
    lines = [
        "docker run -d --network=host \\",
        f"  -e OLLAMA_BASE_URL={base} \\",
        "  -v open-webui:/app/backend/data --name open-webui \\",
        "  ghcr.io/open-webui/open-webui:main",
        f"# then open http://127.0.0.1:8080 (or PORT=3000 in -e) and pick {ollama_model(model)}",
    ]
    if api_key:
        lines.append(f"# {NO_KEY}")
    return "\n".join(lines) + "\n"


def vscode_copilot(base: str, model: str, api_key: str) -> str:
    """VS Code Copilot Chat's bring-your-own-key Ollama provider."""
    settings = {"github.copilot.chat.byok.ollamaEndpoint": base}
    return (
        "// VS Code settings.json; then Chat > Manage Models > Ollama > "
        f"{ollama_model(model)}\n"
        + (f"// {NO_KEY}\n" if api_key else "")
        + json.dumps(settings, indent=2)
        + "\n"
    )


OLLAMA_SNIPPETS = (
    ("Zed", zed),
    ("JetBrains", jetbrains),
    ("Continue (Ollama)", continue_ollama),
    ("Open WebUI", open_webui),
    ("VS Code Copilot", vscode_copilot),
)
