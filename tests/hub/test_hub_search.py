"""Search and file listing against the local Hub stand-in (real huggingface_hub HTTP calls)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.entrypoints.main import main
from backend.gguf_file.gguf_header import read_gguf_header
from backend.hub.hub_search import list_repo_files, remote_gguf_header, search_models
from tests.hub.conftest import GATED_REPO, GGUF_FILE, GGUF_REPO, ST_REPO
from tests.hub.hub_stand_in import HubStandIn


def test_search_filters_gguf_and_safetensors(hub: HubStandIn) -> None:
    gguf = search_models("", kind="gguf", sort="downloads")
    ids = [m.repo_id for m in gguf]
    assert GGUF_REPO in ids and ST_REPO not in ids
    assert ids == sorted(ids, key=lambda i: -next(m.downloads or 0 for m in gguf if m.repo_id == i))
    assert all(m.kind == "gguf" for m in gguf)
    gated = next(m for m in gguf if m.repo_id == GATED_REPO)
    assert gated.gated

    st = search_models("tiny", kind="safetensors")
    assert [m.repo_id for m in st] == [ST_REPO]
    assert st[0].kind == "safetensors" and st[0].pipeline_tag == "text-generation"

    # the query went to /api/models with the filter huggingface_hub builds
    queries = [r.path for r in hub.requests if r.path.startswith("/api/models?")]
    assert any("filter=safetensors" in q and "pipeline_tag=text-generation" in q for q in queries)


def test_search_sorts_by_likes(hub: HubStandIn) -> None:
    found = search_models("", kind="any", sort="likes", limit=2)
    assert [m.repo_id for m in found] == [ST_REPO, GGUF_REPO]


def test_files_lists_sizes_checksums_and_quants(hub: HubStandIn, smollm2_path: Path) -> None:
    listing = list_repo_files(GGUF_REPO)
    gguf = listing.file(GGUF_FILE)
    assert gguf is not None
    assert gguf.size == smollm2_path.stat().st_size
    assert gguf.sha256 == hub.repos[GGUF_REPO].file(GGUF_FILE).sha256  # type: ignore[union-attr]
    assert gguf.quant == "Q4_1" and gguf.kind == "gguf"
    assert not listing.is_safetensors_source

    st = list_repo_files(ST_REPO)
    assert st.is_safetensors_source
    assert sorted(f.path for f in st.source_files()) == [
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
    ]


def test_remote_gguf_header_reads_only_a_prefix(hub: HubStandIn, smollm2_path: Path) -> None:
    header = remote_gguf_header(GGUF_REPO, GGUF_FILE)
    local = read_gguf_header(smollm2_path)
    assert header.file_type_name == "Q4_1"
    assert header.metadata.keys() == local.metadata.keys()
    assert [t.name for t in header.tensors] == [t.name for t in local.tensors]
    assert header.file_size == smollm2_path.stat().st_size
    ranges = hub.ranges_requested("")
    assert ranges and all(r.startswith("bytes=0-") for r in ranges)
    assert max(int(r.split("-")[1]) for r in ranges) < smollm2_path.stat().st_size // 4


def test_cli_search_and_files_json(hub: HubStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "search", "smollm2", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [r["repo_id"] for r in results] == [GGUF_REPO]

    assert main(["models", "files", GGUF_REPO, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    by_path = {f["path"]: f for f in listing["files"]}
    assert by_path[GGUF_FILE]["quant"] == "Q4_1"
    assert by_path["README.md"]["kind"] == "other"

    assert main(["models", "files", GGUF_REPO, "--inspect", "--json"]) == 0
    inspected = {f["path"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    meta = inspected[GGUF_FILE]["metadata"]
    assert meta["file_type"] == "Q4_1" and meta["architecture"] == "llama"
    assert "metadata" not in inspected["README.md"]

    assert main(["models", "files", ST_REPO]) == 0
    assert "conversion" in capsys.readouterr().out


def test_offline_search_fails_at_once_with_one_message(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A refused connection is not retried (huggingface_hub's backoff took ~24 s)."""
    import socket
    import time

    from backend.hub.errors import HubConnectionError
    from backend.hub.hub_settings import HubSettings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HF_ENDPOINT", closed)
    started = time.monotonic()
    with pytest.raises(HubConnectionError, match="cannot reach the Hugging Face Hub"):
        search_models("smol", settings=HubSettings.model_validate({}))
    assert time.monotonic() - started < 5  # no retries on a refused connection
    assert not [r for r in caplog.records if "etry" in r.getMessage()]


def test_a_5xx_search_is_retried(hub: HubStandIn) -> None:
    hub.search_statuses = [503]
    found = search_models("", kind="gguf")
    assert found
    searches = [r for r in hub.requests if r.path.startswith("/api/models?")]
    assert len(searches) == 2
    hub.search_statuses = [503, 503, 503]
    from backend.hub.errors import HubConnectionError

    with pytest.raises(HubConnectionError, match="503"):
        search_models("", kind="gguf")
