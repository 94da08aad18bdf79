"""Turn a dead server's exit status and last log lines into plain words."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from backend.core.errors import QuantDeskError


class ServerProcessError(QuantDeskError):
    """The server child process failed to start or stopped unexpectedly.

    ``kind`` names the cause (``port_in_use``, ``oom``, ``crash``...), ``port`` is the
    port a ``port_in_use`` failure could not listen on, and ``while_starting`` says
    whether the server died before it was ever ready (it then never "stopped").
    """

    def __init__(
        self, kind: str, message: str, port: int | None = None, while_starting: bool = False
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.port = port
        self.while_starting = while_starting


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    message: str


# what the server says when an RPC worker (``serve --rpc``) fails it: the probe's words before
# loading, or the abort hook's when one is lost while serving
_RPC_RE = re.compile(
    r"(RPC worker \S+ (?:is unreachable|accepted but|speaks protocol|broke off|"
    r"offers no devices)[^\n]*|lost RPC worker [^;\n]*|an RPC worker failed|"
    r"llama.cpp could not add RPC worker \S+)"
)


_RULES = (
    _Rule(  # first: the draft's file name is the user's and may contain any other pattern
        "bad_draft",
        re.compile(r"cannot draft for"),
        "{reason}. Pick a draft model of the served model's family under Speculative "
        "decoding, or turn speculative decoding off.",
    ),
    _Rule(  # before oom and bad_model: a worker's failure is said in their words too
        "rpc_worker",
        _RPC_RE,
        "{reason}. Check that 'quantdesk worker' runs there (Test connection under Workers), "
        "or remove it from the Workers list to serve on this machine alone.",
    ),
    _Rule(
        "oom",
        re.compile(
            r"out of memory|failed to allocate|cudaMalloc failed|unable to allocate|"
            r"MemoryError|std::bad_alloc|ggml_backend_.*alloc.*failed|\bOOM\b|"
            r"may not fit in memory|could not create a context",
            re.IGNORECASE,
        ),
        "The model ran out of memory while loading. Lower the context length or parallel "
        "sequences, quantise the KV cache, or offload fewer layers to the GPU; the fit "
        "estimate on the Server page shows what is needed.",
    ),
    _Rule(
        "port_in_use",
        re.compile(r"address already in use|errno 98|errno 48|WinError 10048", re.IGNORECASE),
        "{port} is in use by another program, so the server could not listen on it. "
        "Use a free port (QuantDesk picks one and remembers it), or choose one under "
        "Network.",
    ),
    _Rule(
        "model_not_found",
        re.compile(r"model file not found|default model is missing|not found in package"),
        "The model file could not be found. Pick another model on the Server page.",
    ),
    _Rule(
        "bad_model",
        re.compile(
            r"failed to load model|invalid magic|not a GGUF|unknown model architecture|"
            r"gguf_init",
            re.IGNORECASE,
        ),
        "llama.cpp could not load this file: it is not a valid GGUF, is truncated, or uses an "
        "architecture this llama.cpp build does not know.",
    ),
    _Rule(
        "bad_setting",
        re.compile(r"quantdesk: error: invalid|error: argument|ConfigError"),
        "A server setting was rejected",
    ),
)


# the engine's refusal: "the draft model D cannot draft for M: <why>; speculative decoding ..."
_DRAFT_RE = re.compile(r"(the draft model .+ cannot draft for .+)$", re.MULTILINE)
# `quantdesk serve` says "quantdesk: error: cannot listen on HOST:PORT: <strerror>"
_LISTEN_RE = re.compile(r"cannot listen on \S*:(\d+):")


def _port_in(text: str) -> int | None:
    match = _LISTEN_RE.search(text)
    return int(match.group(1)) if match else None


def explain_exit(
    log_tail: Sequence[str], exit_code: int | None, crashed: bool, port: int | None = None
) -> ServerProcessError:
    """The most likely cause of a server exit, as a :class:`ServerProcessError`.

    ``port`` is the port the server was asked for; the log's own "cannot listen on"
    line wins when it names one.
    """
    text = "\n".join(log_tail)
    last = next((line.strip() for line in reversed(log_tail) if line.strip()), "")
    for rule in _RULES:
        if rule.pattern.search(text):
            message = rule.message
            if rule.kind == "bad_draft":
                found = _DRAFT_RE.findall(text)
                reason = found[-1] if found else "the draft model cannot draft for this model"
                message = message.format(reason=reason[0].upper() + reason[1:])
            if rule.kind == "rpc_worker":
                found = _RPC_RE.findall(text)
                reason = found[-1].rstrip(". ")
                message = message.format(reason=reason[0].upper() + reason[1:])
            if rule.kind == "bad_setting" and last:
                message = f"{rule.message}: {last.removeprefix('quantdesk: error: ')}"
            if rule.kind == "port_in_use":
                port = _port_in(text) or port
                message = message.format(port=f"Port {port}" if port else "The port")
                return ServerProcessError(rule.kind, message, port=port or None)
            return ServerProcessError(rule.kind, message)
    how = "was killed or crashed" if crashed else f"exited with code {exit_code}"
    detail = f" Last log line: {last}" if last else ""
    return ServerProcessError("crash", f"The server {how}.{detail}")


def explain_load_failure(model: str, message: str, code: str | None) -> ServerProcessError:
    """Why the library server could not load ``model`` (``POST /models/load`` answered
    ``message`` with the OpenAI error ``code``), in the same plain words as a dead server:
    the model's own server's last error line matches the same rules."""
    if code == "insufficient_memory":
        return ServerProcessError(
            "oom",
            f"{model} does not fit in the memory left for models: {message}. Lower the "
            "context length or parallel sequences, quantise the KV cache, or unload another "
            "model.",
            while_starting=True,
        )
    if code in ("model_load_failed", None):
        error = explain_exit([message], None, crashed=False)
        if error.kind != "crash":
            error.while_starting = True
            return error
    return ServerProcessError(
        "load_failed", f"{model} could not be loaded: {message}", while_starting=True
    )


def failure_title(error: ServerProcessError | None, *, footer: bool = False) -> str:
    """A few words for a status label: what went wrong, not only that something did.
    ``footer``: the same as a sentence about the server, for the sidebar footer."""
    if error is not None and error.kind == "port_in_use":
        return f"Port {error.port} in use" if error.port else "Port in use"
    if error is not None and error.kind == "oom":
        title, sentence = "Out of memory", "Server ran out of memory"
    elif error is not None and (
        error.while_starting
        or error.kind
        in (
            "launch",
            "timeout",
            "model_not_found",
            "bad_model",
            "bad_draft",
            "bad_setting",
            "load_failed",
            "rpc_worker",
        )
    ):
        title, sentence = "Could not start", "Server could not start"
    else:
        title, sentence = "Stopped unexpectedly", "Server stopped unexpectedly"
    return sentence if footer else title
    if error.kind == "port_in_use":
        return f"Port {error.port} in use" if error.port else "Port in use"
    if error.kind == "oom":
        return "Out of memory"
    if error.while_starting or error.kind in (
        "launch",
        "timeout",
        "model_not_found",
        "bad_model",
        "bad_setting",
    ):
        return "Could not start"
    return "Stopped unexpectedly"
