"""The Server page's status and endpoint, without Qt: each state's words and buttons, what a
failure offers, and the URL and snippets clients get."""

from __future__ import annotations

import json

import yaml

from app.page_models.ollama_snippets import OLLAMA_SNIPPETS
from app.page_models.server_errors import ServerProcessError
from app.page_models.server_status import (
    Endpoint,
    failure_advice,
    port_moved_note,
    served_model,
    serving_detail,
    status_view,
)
from app.page_models.snippets import SNIPPETS
from app.storage.app_settings import ServerKnobs


def test_each_state_says_what_happens_and_which_buttons_work() -> None:
    stopped = status_view("stopped", None, has_run=False)
    assert stopped.title == "Stopped"
    assert stopped.detail == "Press Start to serve the selected model."
    assert (stopped.can_start, stopped.can_stop, stopped.can_restart) == (True, False, False)
    starting = status_view("starting", None, has_run=True)
    assert starting.title == "Starting…" and starting.detail == "Loading the model and warming up…"
    assert (starting.can_start, starting.can_stop, starting.can_restart) == (False, True, True)
    running = status_view("running", None, has_run=True)
    assert running.title == "Running" and running.detail is None  # the serving line stays
    stopping = status_view("stopping", None, has_run=True)
    assert (stopping.can_start, stopping.can_stop, stopping.can_restart) == (False, False, False)
    port = ServerProcessError("port_in_use", "Port 8080 is in use", port=8080)
    crashed = status_view("crashed", port, has_run=True)
    assert crashed.title == "Port 8080 in use"
    assert (crashed.can_start, crashed.can_stop, crashed.can_restart) == (True, False, True)


def test_a_failure_offers_what_can_help() -> None:
    port = failure_advice(ServerProcessError("port_in_use", "busy", port=8080))
    assert port.action == "Use a free port" and "another program holds the port" in port.detail
    assert not port.with_estimate
    oom = failure_advice(ServerProcessError("oom", "out of memory", while_starting=True))
    assert oom.action == "Restart" and oom.with_estimate
    assert oom.detail.startswith("The server did not start.")
    crash = failure_advice(ServerProcessError("crash", "killed"))
    assert crash.action == "Restart" and not crash.with_estimate
    assert crash.detail == "The server stopped. Your chats are kept; restart when ready."
    assert failure_advice(None).action == "Restart"
    note = port_moved_note(8080, 51234)
    assert note.startswith("Port 8080 is in use") and "serves on port 51234" in note


def test_the_endpoint_names_the_model_and_the_port_clients_dial() -> None:
    knobs = ServerKnobs(model="/lib/My-Model-Q4_K_M.gguf", host="0.0.0.0", port=0, api_key="k")
    form = Endpoint.of(knobs)  # port 0 ("any free port"): the snippets show the default
    assert form.api_url == "http://127.0.0.1:8080/v1"
    assert form.model == "My-Model-Q4_K_M" and form.api_key == "k"
    running = Endpoint.of(knobs, 40123)
    assert running.url == "http://127.0.0.1:40123"
    snippets = running.snippets()
    titles = [title for title, _write in (*SNIPPETS, *OLLAMA_SNIPPETS)]
    assert [title for title, _code in snippets] == titles
    assert all("40123" in code for _title, code in snippets)
    assert any("My-Model-Q4_K_M" in code for _title, code in snippets)
    assert served_model("default") == "SmolLM2-135M-Instruct"
    default = ServerKnobs(model="default", ctx_size=16384, parallel=4)
    assert (
        serving_detail(default, 1234)
        == "SmolLM2-135M-Instruct · 4 parallel × 4,096 tokens · pid 1234"
    )
    shared = default.model_copy(update={"kv_unified": True})
    assert serving_detail(shared, 1234).endswith("4 parallel sharing 16,384 tokens · pid 1234")


def test_the_cpu_path_line_says_the_path_the_buffers_and_why() -> None:
    from app.page_models.server_status import cpu_path_text

    on = cpu_path_text("AMX", "extra buffer types on (probe passed)", ["AMX", "CPU_REPACK"])
    assert on == "CPU path: AMX (AMX, CPU_REPACK) · extra buffer types on (probe passed)"
    off = cpu_path_text("plain", "extra buffer types off: probe child died on SIGILL", ["AMX"])
    assert off == "CPU path: plain · extra buffer types off: probe child died on SIGILL"


def test_the_ollama_setups_render_and_point_at_the_ollama_port() -> None:
    """Each client's setup parses as its file format and names the Ollama URL (11434 when
    the server answers there) and the model by its Ollama name."""
    knobs = ServerKnobs(model="/lib/My-Model-Q4_K_M.gguf", port=8080, ollama_port=11434)
    setups = dict(Endpoint.of(knobs, 40123).snippets())
    for title, _write in OLLAMA_SNIPPETS:
        assert "http://127.0.0.1:11434" in setups[title], title
        assert "My-Model-Q4_K_M:latest" in setups[title], title

    def json_part(code: str) -> dict[str, object]:
        return json.loads("\n".join(ln for ln in code.splitlines() if not ln.startswith("//")))

    zed = json_part(setups["Zed"])["language_models"]["ollama"]  # type: ignore[index]
    assert zed["api_url"] == "http://127.0.0.1:11434"
    assert zed["available_models"][0]["name"] == "My-Model-Q4_K_M:latest"
    copilot = json_part(setups["VS Code Copilot"])
    assert copilot == {"github.copilot.chat.byok.ollamaEndpoint": "http://127.0.0.1:11434"}
    (model,) = yaml.safe_load(setups["Continue (Ollama)"])["models"]
    assert model["provider"] == "ollama" and model["apiBase"] == "http://127.0.0.1:11434"
    assert "OLLAMA_BASE_URL=http://127.0.0.1:11434" in setups["Open WebUI"]
    # without the second port, the main one (which answers Ollama's routes too)
    plain = dict(Endpoint.of(knobs.model_copy(update={"ollama_port": None}), 40123).snippets())
    assert "http://127.0.0.1:40123" in plain["Zed"]
