"""The Server page's status and endpoint without Qt: the status line, buttons and detail of
each supervisor state (``ServerState`` values), what a failure advises, and the endpoint
the copy-paste snippets point at."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.page_models.ollama_snippets import OLLAMA_SNIPPETS
from app.page_models.server_command import base_url
from app.page_models.server_errors import ServerProcessError, failure_title
from app.page_models.snippets import SNIPPETS
from app.storage.app_settings import ServerKnobs
from backend.settings.default_model import DEFAULT_MODEL_ID

STATE_TITLES = {
    "running": "Running",
    "starting": "Starting…",
    "stopping": "Stopping…",
    "stopped": "Stopped",
}
STATE_DETAILS = {
    "starting": "Loading the model and warming up…",
    "stopped": "Press Start to serve the selected model.",
}
ACTIVE_STATES = ("starting", "running", "stopping")
RESTART_TO_APPLY = "Settings changed: press Restart to apply them."
DEFAULT_PORT = 8080  # what the snippets show while the port is "any free port"


@dataclass(frozen=True)
class StatusView:
    """The Status box for one state: its title, detail line (``None``: keep the one shown)
    and which buttons work."""

    title: str
    detail: str | None
    can_start: bool
    can_stop: bool
    can_restart: bool


def status_view(state: str, error: ServerProcessError | None, has_run: bool) -> StatusView:
    """``has_run``: the supervisor has knobs to restart with."""
    title = failure_title(error) if state == "crashed" else STATE_TITLES.get(state, state)
    active = state in ACTIVE_STATES
    return StatusView(
        title,
        STATE_DETAILS.get(state),
        can_start=not active,
        can_stop=active and state != "stopping",
        can_restart=state != "stopping" and has_run,
    )


def served_model(model: str) -> str:
    """The name clients send as ``model``: the file's stem, or the embedded model's id."""
    return DEFAULT_MODEL_ID if model == "default" else Path(model).stem


def serving_detail(knobs: ServerKnobs, pid: int | None) -> str:
    """'SmolLM2-135M-Instruct · 4 parallel × 4,096 tokens · pid 1234': what one request may
    hold, which with a KV stream per slot (the default) is the context split by the slots;
    with --kv-unified, '4 parallel sharing 16,384 tokens'; and '· with 2 RPC workers' when
    the model is split across other machines."""
    if knobs.kv_unified:
        room = f"{knobs.parallel} parallel sharing {knobs.ctx_size:,} tokens"
    else:
        room = f"{knobs.parallel} parallel × {knobs.ctx_size // knobs.n_seq_max:,} tokens"
    workers = len([w for w in (knobs.rpc or "").split(",") if w.strip()])
    spread = f" · with {workers} RPC worker{'s' if workers != 1 else ''}" if workers else ""
    return f"{served_model(knobs.model)} · {room}{spread} · pid {pid}"


def cpu_path_text(path: str, reason: str, extra_buffers: list[str]) -> str:
    """The Status box's line on how the served model's CPU weights run, e.g.
    'CPU path: repack (CPU_REPACK) · extra buffer types on (probe passed)' or
    'CPU path: plain · extra buffer types off: probe child died on SIGSEGV'."""
    buffers = f" ({', '.join(extra_buffers)})" if path != "plain" and extra_buffers else ""
    return f"CPU path: {path}{buffers}" + (f" · {reason}" if reason else "")


@dataclass(frozen=True)
class FailureAdvice:
    """What the page offers after a failure: the banner's button, the detail line, and
    whether the fit estimate goes into the message."""

    action: str
    detail: str
    with_estimate: bool = False


def failure_advice(error: ServerProcessError | None) -> FailureAdvice:
    if error is not None and error.kind == "port_in_use":
        return FailureAdvice(
            "Use a free port", "Nothing was started: another program holds the port."
        )
    with_estimate = error is not None and error.kind == "oom"
    if error is not None and error.while_starting:
        detail = "The server did not start. Change the settings or the model, then restart."
    else:
        detail = "The server stopped. Your chats are kept; restart when ready."
    return FailureAdvice("Restart", detail, with_estimate)


def port_moved_note(busy: int, port: int) -> str:
    """What the first run says after it found the default port taken."""
    return (
        f"Port {busy} is in use by another program, so QuantDesk serves on port {port} "
        "instead and will keep using it. You can change it under Network."
    )


@dataclass(frozen=True)
class Endpoint:
    """Where clients reach the server, and as whom."""

    url: str  # http://host:port
    model: str
    api_key: str
    ollama_url: str = ""  # where Ollama's clients reach it (default: url)

    @classmethod
    def of(cls, knobs: ServerKnobs, port: int | None = None) -> Endpoint:
        """The endpoint of ``knobs``, on ``port`` when the server told it (a running one)."""
        listen = port if port is not None else knobs.port or DEFAULT_PORT
        url = base_url(knobs.host, listen)
        ollama = f"http://127.0.0.1:{knobs.ollama_port}" if knobs.ollama_port else url
        return cls(url, served_model(knobs.model), knobs.api_key, ollama)

    @property
    def api_url(self) -> str:
        return f"{self.url}/v1"

    def snippets(self) -> list[tuple[str, str]]:
        """(title, code) of each copy-paste snippet."""
        ollama = self.ollama_url or self.url
        return [(title, write(self.url, self.model, self.api_key)) for title, write in SNIPPETS] + [
            (title, write(ollama, self.model, self.api_key)) for title, write in OLLAMA_SNIPPETS
        ]
