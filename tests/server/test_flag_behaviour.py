"""A value of each llama-server flag that ``quantdesk serve`` accepts with a meaning changes
what it does: tests/server/flag_behaviour_tests.py names a test per flag family, and this
file holds the ones no other test file had. Each goes from serve's command line (its parser)
to the component the setting reaches: the speculator, the sampling of a request, the
projector lookup, the bound socket, llama.cpp's context, and one small server.
"""

from __future__ import annotations

import ast
import functools
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import llama_cpp
import pytest

from backend.engine.engine import Engine
from backend.engine.model_runtime import ModelRuntime
from backend.engine.sequence import Sequence
from backend.engine.speculative.draft_model import DraftModel, DraftRequest
from backend.engine.speculative.speculator import Speculator
from backend.gguf_file.projector_file import projector_path
from backend.server.generation import sampling_params
from backend.server.runner import ServerHandle
from backend.server.schemas import SamplingFields
from backend.settings import EngineSettings, ServerSettings
from backend.settings.flags import settings_from_args
from backend.settings.llama_server_flag_table import LLAMA_SERVER_FLAGS
from tests.engine.scheduling_fakes import make_seq, prompt
from tests.server.conftest import LiveServer, serving
from tests.server.flag_behaviour_tests import FLAG_BEHAVIOUR_TESTS
from tests.server.test_reasoning import ANSWER, THOUGHT, WRITTEN, chat
from tests.server.test_serve_cli import _parse_serve

ROOT = Path(__file__).resolve().parents[2]
# an answer that copies its prompt: the last 12 tokens (108-119) occurred once before,
# followed by 120, 121...
COPY = [*range(100, 200), *range(100, 120)]


def _engine(*argv: str) -> EngineSettings:
    return settings_from_args(EngineSettings, _parse_serve(list(argv)))


def _server(*argv: str) -> ServerSettings:
    return settings_from_args(ServerSettings, _parse_serve(list(argv)))


# --- the map of flags to tests --------------------------------------------------------------
@functools.cache
def _test_functions(path: Path) -> frozenset[str]:
    """The test functions ``path`` defines (at module level or in a class)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    )


def test_every_flag_with_a_meaning_names_existing_tests_of_its_behaviour() -> None:
    meant = {
        flag.spellings[0]
        for flag in LLAMA_SERVER_FLAGS
        if flag.status in ("supported", "mapped") and not flag.no_op
    }
    assert sorted(meant - FLAG_BEHAVIOUR_TESTS.keys()) == [], "flags without a behaviour test"
    assert sorted(FLAG_BEHAVIOUR_TESTS.keys() - meant) == [], (
        "entries for flags that are not supported or mapped (or not a family's first spelling)"
    )
    for flag, node_ids in FLAG_BEHAVIOUR_TESTS.items():
        assert node_ids, flag
        for node_id in node_ids:
            path, _, name = node_id.partition("::")
            assert name and "[" not in name and "::" not in name, (flag, node_id)
            file = ROOT / path
            assert file.is_file(), f"{flag}: no file {path}"
            assert name in _test_functions(file), f"{flag}: {path} defines no {name}"


# --- speculative decoding: the speculator serve's flags build -------------------------------
class _FakeDraftModel:
    """A draft model that drafts as many tokens as it is asked for."""

    cost = None

    def draft(self, requests: list[DraftRequest]) -> None:
        for request in requests:
            request.draft = list(range(1000, 1000 + request.n_max))


def _generating(tokens: list[int], max_tokens: int) -> Sequence:
    """A sequence that has generated its last token and may generate up to ``max_tokens``."""
    seq = make_seq(tokens[:-1], max_tokens=max_tokens)
    seq.seq_id = 0
    seq.tokens.append(tokens[-1])
    seq.completion_tokens = 1
    seq.n_past = len(seq.tokens) - 1
    return seq


def _draft(
    argv: list[str], tokens: list[int], *, max_tokens: int = 200, draft_model: bool = False
) -> list[int]:
    """What the speculator of ``serve ARGV`` drafts after ``tokens``."""
    model = cast(DraftModel, _FakeDraftModel()) if draft_model else None
    speculator = Speculator(_engine(*argv), n_ctx_seq=4096, draft_model=model)
    seq = _generating(tokens, max_tokens)
    speculator.propose([seq])
    return seq.draft


def test_spec_type_turns_the_ngram_drafts_on_and_off() -> None:
    assert _draft(["--spec-type", "ngram-simple"], COPY)[:3] == [120, 121, 122]
    assert _draft(["--spec-type", "none"], COPY) == []


def test_ngram_size_m_caps_the_ngram_drafts() -> None:
    assert _draft(["--spec-ngram-simple-size-m", "5"], COPY) == [120, 121, 122, 123, 124]
    assert _draft(["--spec-ngram-simple-size-m", "7"], COPY) == list(range(120, 127))


def test_ngram_size_n_is_the_longest_ngram_looked_up() -> None:
    """After an edit only the last 2 tokens occurred before: -size-n 2 drafts what followed
    them, -size-n 3 (with -size-n-min 3) finds nothing."""
    edited = [*range(100, 200), 7, 150, 151]
    assert _draft(["--spec-ngram-simple-size-n", "2"], edited)[:3] == [152, 153, 154]
    assert _draft(["--spec-ngram-simple-size-n", "3"], edited) == []


def test_ngram_min_hits_wants_that_many_occurrences() -> None:
    assert _draft(["--spec-ngram-simple-min-hits", "1"], COPY)[:2] == [120, 121]
    assert _draft(["--spec-ngram-simple-min-hits", "2"], COPY) == []  # it occurred once


@pytest.mark.parametrize("spelling", ["--spec-draft-n-max", "--draft", "--draft-n", "--draft-max"])
def test_draft_n_max_caps_the_draft_models_drafts(spelling: str) -> None:
    argv = ["--spec-type", "draft-simple", "-md", "draft.gguf"]
    assert _draft([*argv, spelling, "3"], prompt(100, 40), draft_model=True) == [1000, 1001, 1002]
    assert len(_draft([*argv, spelling, "5"], prompt(100, 40), draft_model=True)) == 5


@pytest.mark.parametrize("spelling", ["--spec-draft-n-min", "--draft-min", "--draft-n-min"])
def test_draft_n_min_leaves_shorter_drafts_unverified(spelling: str) -> None:
    """Room for 3 more tokens: a draft of 3 is worth verifying at -n-min 3, not at 4."""
    room_3 = 1 + 3 + 1  # the token generated, 3 drafted, the last row's own token
    assert _draft([spelling, "3"], COPY, max_tokens=room_3) == [120, 121, 122]
    assert _draft([spelling, "4"], COPY, max_tokens=room_3) == []


# --- sampling: the server's seed ------------------------------------------------------------
def test_the_seed_is_the_one_of_requests_that_give_none() -> None:
    def seed(argv: list[str], body: dict[str, Any]) -> int | None:
        engine = cast(Engine, SimpleNamespace(settings=_engine(*argv)))
        return sampling_params(SamplingFields.model_validate(body), engine).seed

    assert seed(["-s", "7"], {}) == 7
    assert seed(["--seed", "8"], {}) == 8
    assert seed([], {}) is None  # -1, the default: a random seed for each request
    assert seed(["-s", "7"], {"seed": 3}) == 3  # a request's own seed wins


# --- media: --no-mmproj ---------------------------------------------------------------------
def test_no_mmproj_loads_no_projector_beside_the_model(tmp_path: Path) -> None:
    model = tmp_path / "vision-Q8_0.gguf"
    beside = tmp_path / "mmproj-vision-F16.gguf"
    model.write_bytes(b"")
    beside.write_bytes(b"")

    def projector(*argv: str) -> Path | None:
        settings = _engine(*argv)
        return projector_path(model, settings.mmproj, settings.no_mmproj)

    assert projector() == projector("--mmproj-auto") == beside
    assert projector("--no-mmproj") is None
    assert projector("--no-mmproj-auto") is None
    assert projector("--no-mmproj", "--mmproj-auto") == beside


# --- listening: --host and --port -----------------------------------------------------------
def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def test_serve_listens_on_the_host_and_port_asked() -> None:
    """The socket is bound as serve builds it (the model loads only once it runs)."""
    for host in ("127.0.0.1", "127.0.0.2"):
        port = _free_port(host)
        handle = ServerHandle(EngineSettings(), _server("--host", host, "--port", str(port)))
        try:
            assert handle.sock.getsockname() == (host, port)
            assert handle.base_url == f"http://{host}:{port}"
            socket.create_connection((host, port), timeout=5).close()  # listening
        finally:
            handle.stop()


# --- llama.cpp's context and model ----------------------------------------------------------
def test_engine_flags_reach_llama_cpps_context_and_model(
    smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-t, -tb, -b and -ub as llama.cpp's context reports them; -ngl and -sm as its model
    parameters get them (no GPU, nor a second device, to see them act on here)."""
    loaded: list[tuple[int, int]] = []
    load = llama_cpp.llama_model_load_from_file

    def recording_load(path: bytes, params: Any) -> Any:
        loaded.append((params.n_gpu_layers, params.split_mode))
        return load(path, params)

    monkeypatch.setattr(llama_cpp, "llama_model_load_from_file", recording_load)
    cases = [
        (("1", "2", "64", "32", "0", "none"), (0, llama_cpp.LLAMA_SPLIT_MODE_NONE)),
        (("2", "1", "128", "64", "5", "row"), (5, llama_cpp.LLAMA_SPLIT_MODE_ROW)),
    ]
    for (t, tb, b, ub, ngl, sm), model_params in cases:
        argv = ["-c", "256", "-np", "1", "-t", t, "-tb", tb, "-b", b, "-ub", ub]
        settings = _engine(*argv, "-ngl", ngl, "-sm", sm)
        runtime = ModelRuntime(smollm2_path, settings, n_seq_max=1)
        try:
            ctx = runtime.ctx
            assert (llama_cpp.llama_n_threads(ctx), llama_cpp.llama_n_threads_batch(ctx)) == (
                int(t),
                int(tb),
            )
            assert (llama_cpp.llama_n_batch(ctx), llama_cpp.llama_n_ubatch(ctx)) == (
                int(b),
                int(ub),
            )
        finally:
            runtime.close()
        assert loaded.pop() == model_params


# --- one small server: -a and --reasoning-format --------------------------------------------
@pytest.fixture(scope="module")
def flagged_server() -> Iterator[LiveServer]:
    """SmolLM2 served with ``-a flag-alias --reasoning-format none`` (small -c and -np)."""
    engine = _engine("-c", "512", "-np", "1", "-t", "2", "-a", "flag-alias")
    server = _server("--host", "127.0.0.1", "--port", "0", "--reasoning-format", "none")
    yield from serving(engine, server)


def test_the_alias_is_the_model_id_clients_see(flagged_server: LiveServer) -> None:
    base = flagged_server.base_url
    models = httpx.get(f"{base}/v1/models", timeout=30).json()["data"]
    assert [model["id"] for model in models] == ["flag-alias"]
    assert httpx.get(f"{base}/props", timeout=30).json()["model_alias"] == "flag-alias"
    assert httpx.get(f"{base}/v1/models/flag-alias", timeout=30).status_code == 200


def test_the_servers_reasoning_format_is_the_default_of_requests(
    flagged_server: LiveServer,
) -> None:
    """With none the thinking stays in the text (the default, auto, splits it off: see
    tests/server/test_reasoning.py); a request's own reasoning_format still wins."""
    message = chat(flagged_server)["choices"][0]["message"]
    assert message["content"] == WRITTEN and "reasoning_content" not in message
    message = chat(flagged_server, reasoning_format="auto")["choices"][0]["message"]
    assert message["reasoning_content"] == THOUGHT and message["content"] == ANSWER
