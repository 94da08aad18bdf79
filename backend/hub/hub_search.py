"""Search the Hugging Face Hub and list a repo's files (huggingface_hub ``HfApi``)."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import httpx2
from huggingface_hub import HfApi
from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from backend.gguf_file.errors import GGUFFormatError, GGUFTruncatedError
from backend.gguf_file.ggml_types import quant_from_filename
from backend.gguf_file.gguf_header import GGUFHeader, parse_gguf_header
from backend.gguf_file.projector_file import is_projector
from backend.hub.errors import HubError
from backend.hub.hub_errors import hub_errors
from backend.hub.hub_settings import HubSettings

log = logging.getLogger(__name__)

ModelKind = Literal["gguf", "safetensors", "any"]
SortKey = Literal["downloads", "likes", "recent"]

_SORT_PARAM = {"downloads": "downloads", "likes": "likes", "recent": "lastModified"}
# A search that times out or meets a 5xx is tried again this often, after these waits;
# a refused connection or an unknown host fails at once (the machine is offline).
SEARCH_RETRY_WAITS_S = (0.5, 1.5)
_EXPAND = ["downloads", "likes", "lastModified", "tags", "pipeline_tag", "library_name", "gated"]

# Files a safetensors repo needs for conversion to GGUF (besides the weights).
SOURCE_FILE_SUFFIXES = (".safetensors", ".json", ".model", ".txt", ".jinja", ".tiktoken", ".py")


@dataclass(frozen=True)
class HubModel:
    """One search result."""

    repo_id: str
    downloads: int | None
    likes: int | None
    last_modified: str | None
    pipeline_tag: str | None
    library: str | None
    gated: bool
    tags: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        if "gguf" in self.tags or self.library == "gguf":
            return "gguf"
        if "safetensors" in self.tags:
            return "safetensors"
        return "other"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind}


def file_kind(path: str) -> str:
    lower = path.lower()
    if lower.endswith(".gguf"):
        return "gguf"
    if lower.endswith(".safetensors"):
        return "safetensors"
    if lower.endswith(".safetensors.index.json"):
        return "safetensors-index"
    if lower.rsplit("/", 1)[-1] == "config.json":
        return "config"
    return "other"


def _is_f16(path: str) -> bool:
    lower = path.lower()
    return "f16" in lower and "bf16" not in lower


@dataclass(frozen=True)
class HubFile:
    """One file of a repo, with the SHA-256 the Hub publishes for LFS files."""

    path: str
    size: int | None
    sha256: str | None
    blob_id: str | None

    @property
    def kind(self) -> str:
        return file_kind(self.path)

    @property
    def quant(self) -> str | None:
        return quant_from_filename(self.path) if self.kind == "gguf" else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": self.kind, "quant": self.quant}


@dataclass(frozen=True)
class RepoListing:
    """A repo's files at one commit."""

    repo_id: str
    revision: str | None
    gated: bool
    files: list[HubFile]

    @property
    def gguf_files(self) -> list[HubFile]:
        """The model GGUFs (projectors are not models: see :meth:`projector_for`)."""
        return [f for f in self.files if f.kind == "gguf" and not is_projector(Path(f.path))]

    @property
    def has_projector(self) -> bool:
        """The repo ships a projector: its models read images."""
        return any(is_projector(Path(f.path)) for f in self.files)

    def projector_for(self, model: HubFile) -> HubFile | None:
        """The projector (``mmproj*.gguf``) in ``model``'s folder of the repo: the model
        reads images with it. Of several, the F16 one (what llama.cpp's docs use), else the
        first by name."""
        folder = str(Path(model.path).parent)
        found = sorted(
            (
                f
                for f in self.files
                if is_projector(Path(f.path)) and str(Path(f.path).parent) == folder
            ),
            key=lambda f: (0 if _is_f16(f.path) else 1, f.path),
        )
        return found[0] if found else None

    @property
    def is_safetensors_source(self) -> bool:
        """True for HF-format repos (config.json + safetensors weights) that can be converted."""
        kinds = {f.kind for f in self.files}
        return "safetensors" in kinds and any(f.path == "config.json" for f in self.files)

    def source_files(self) -> list[HubFile]:
        """The files a conversion needs: weights, configs, tokenizer (top-level only)."""
        return [
            f
            for f in self.files
            if "/" not in f.path and f.path.lower().endswith(SOURCE_FILE_SUFFIXES)
        ]

    def file(self, path: str) -> HubFile | None:
        return next((f for f in self.files if f.path == path), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "gated": self.gated,
            "is_safetensors_source": self.is_safetensors_source,
            "files": [f.to_dict() for f in self.files],
        }


def hf_api(settings: HubSettings) -> HfApi:
    return HfApi(endpoint=settings.endpoint(), token=settings.token())


def _get_json(url: str, params: dict[str, Any], settings: HubSettings) -> Any:
    """GET a Hub API URL as JSON, retrying only what a retry can mend: timeouts and 5xx.

    huggingface_hub's own backoff also retries refused connections and DNS failures,
    five times over about 24 s, so an offline search looked hung."""
    headers = build_hf_headers(token=settings.token())
    for wait in (*SEARCH_RETRY_WAITS_S, None):
        try:
            response = get_session().get(url, params=params, headers=headers, timeout=10)
        except httpx2.TimeoutException:
            if wait is None:
                raise
        else:
            if response.status_code < 500 or wait is None:
                hf_raise_for_status(response)
                return response.json()
        log.info("Hub search: retrying in %.1f s", wait)
        time.sleep(wait)
    raise AssertionError("unreachable")


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def search_models(
    query: str,
    *,
    kind: ModelKind = "gguf",
    sort: SortKey = "downloads",
    limit: int = 20,
    settings: HubSettings | None = None,
) -> list[HubModel]:
    """Models matching ``query``: GGUF repos, text-generation safetensors repos, or any."""
    settings = settings or HubSettings.model_validate({})
    filters: list[str] = []
    pipeline_tag: str | None = None
    if kind == "gguf":
        filters.append("gguf")
    elif kind == "safetensors":
        filters.append("safetensors")
        pipeline_tag = "text-generation"
    params: dict[str, Any] = {"sort": _SORT_PARAM[sort], "limit": limit, "expand": _EXPAND}
    if query:
        params["search"] = query
    if filters:
        params["filter"] = filters
    if pipeline_tag:
        params["pipeline_tag"] = pipeline_tag
    with hub_errors(repo_id=f"search {query!r}", endpoint=settings.endpoint()):
        items = _get_json(f"{settings.endpoint()}/api/models", params, settings)
    infos = [ModelInfo(**{"siblings": None, **item}) for item in items[:limit]]
    return [
        HubModel(
            repo_id=info.id,
            downloads=info.downloads,
            likes=info.likes,
            last_modified=_iso(info.last_modified),
            pipeline_tag=info.pipeline_tag,
            library=info.library_name,
            gated=bool(info.gated),
            tags=list(info.tags or []),
        )
        for info in infos
    ]


def list_repo_files(
    repo_id: str, *, revision: str | None = None, settings: HubSettings | None = None
) -> RepoListing:
    """A repo's files with sizes and LFS SHA-256, pinned to the commit the Hub reports."""
    settings = settings or HubSettings.model_validate({})
    api = hf_api(settings)
    with hub_errors(repo_id=repo_id, endpoint=settings.endpoint()):
        info = api.model_info(repo_id, revision=revision, files_metadata=True)
    files = [
        HubFile(
            path=s.rfilename,
            size=s.lfs.size if s.lfs else s.size,
            sha256=s.lfs.sha256 if s.lfs else None,
            blob_id=s.blob_id,
        )
        for s in info.siblings or []
    ]
    return RepoListing(repo_id=info.id, revision=info.sha, gated=bool(info.gated), files=files)


def remote_gguf_header(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    settings: HubSettings | None = None,
    max_bytes: int = 64 << 20,
) -> GGUFHeader:
    """Read a remote GGUF's header with HTTP Range requests (a few MB, never the weights)."""
    from huggingface_hub import hf_hub_url

    settings = settings or HubSettings.model_validate({})
    endpoint = settings.endpoint()
    url = hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    headers = build_hf_headers(token=settings.token())
    want = 2 << 20
    while True:
        with hub_errors(repo_id=repo_id, endpoint=endpoint, filename=filename):
            response = get_session().get(url, headers={**headers, "Range": f"bytes=0-{want - 1}"})
            hf_raise_for_status(response)
        data = response.content
        total = _total_size(response.headers.get("Content-Range"), len(data))
        try:
            return parse_gguf_header(data, filename, file_size=total)
        except GGUFTruncatedError:
            if len(data) < want or want >= max_bytes:
                raise GGUFFormatError(f"{filename}: GGUF header larger than {want} bytes") from None
            want *= 4


def _total_size(content_range: str | None, fallback: int) -> int:
    if content_range and "/" in content_range:
        tail = content_range.rsplit("/", 1)[1]
        if tail.isdigit():
            return int(tail)
    return fallback


__all__ = [
    "HubError",
    "HubFile",
    "HubModel",
    "RepoListing",
    "list_repo_files",
    "remote_gguf_header",
    "search_models",
]
