"""A local stand-in for the Hugging Face Hub: the endpoints huggingface_hub calls, on 127.0.0.1.

It serves real bytes (files on disk or in memory) with the headers the Hub sends:
``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag`` / ``X-Linked-Size`` for LFS files
(which, as on the Hub, redirect to a "CDN" path), ``Accept-Ranges`` and ``206``
partial content for ``Range`` requests, and the ``X-Error-Code`` headers that
huggingface_hub turns into GatedRepoError / RepositoryNotFoundError /
EntryNotFoundError.

Endpoints: ``GET /api/models`` (search), ``GET /api/models/{repo}[/revision/{rev}]``
(info, ``blobs=True`` adds sizes and LFS metadata), ``GET /api/models/{repo}/tree/{rev}``,
``HEAD|GET /{repo}/resolve/{rev}/{file}`` and ``HEAD|GET /_cdn/{sha256}``.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse


def _sha256_of(data: bytes | None, path: Path | None) -> str:
    digest = hashlib.sha256()
    if data is not None:
        digest.update(data)
    else:
        assert path is not None
        with path.open("rb") as fh:
            while chunk := fh.read(8 << 20):
                digest.update(chunk)
    return digest.hexdigest()


@dataclass
class StandInFile:
    """A file in a repo; LFS files are addressed by SHA-256, small ones by git blob SHA-1."""

    path: str
    data: bytes | None = None
    source: Path | None = None
    lfs: bool = True
    advertised_sha256: str | None = None  # what the Hub claims (defaults to the real hash)
    sha256: str = ""
    blob_id: str = ""

    def __post_init__(self) -> None:
        self.sha256 = _sha256_of(self.data, self.source)
        size = self.size
        if self.lfs:
            self.blob_id = hashlib.sha1(f"lfs-pointer-{self.sha256}".encode()).hexdigest()
        else:
            body = self.read(0, size)
            self.blob_id = hashlib.sha1(f"blob {size}\0".encode() + body).hexdigest()

    @property
    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.source is not None
        return self.source.stat().st_size

    @property
    def published_sha256(self) -> str:
        return self.advertised_sha256 or self.sha256

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``."""
        if self.data is not None:
            return self.data[start:end]
        assert self.source is not None
        with self.source.open("rb") as fh:
            fh.seek(start)
            return fh.read(end - start)


@dataclass
class StandInRepo:
    repo_id: str
    files: list[StandInFile]
    tags: list[str] = field(default_factory=list)
    pipeline_tag: str | None = "text-generation"
    library_name: str | None = None
    downloads: int = 0
    likes: int = 0
    last_modified: str = "2025-01-01T00:00:00.000Z"
    gated: bool | str = False
    private: bool = False
    allowed_tokens: set[str] = field(default_factory=set)
    sha: str = ""

    def __post_init__(self) -> None:
        if not self.sha:
            self.sha = hashlib.sha1(self.repo_id.encode()).hexdigest()

    def file(self, path: str) -> StandInFile | None:
        return next((f for f in self.files if f.path == path), None)

    def summary(self) -> dict[str, Any]:
        return {
            "_id": self.sha[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "author": self.repo_id.split("/")[0],
            "likes": self.likes,
            "downloads": self.downloads,
            "tags": self.tags,
            "pipeline_tag": self.pipeline_tag,
            "library_name": self.library_name,
            "lastModified": self.last_modified,
            "createdAt": self.last_modified,
            "private": self.private,
            "gated": self.gated,
        }


@dataclass
class RequestRecord:
    method: str
    path: str
    headers: dict[str, str]


class HubStandIn:
    """Start with :meth:`start`; point ``HF_ENDPOINT`` at :attr:`url`."""

    def __init__(self) -> None:
        self.repos: dict[str, StandInRepo] = {}
        self.requests: list[RequestRecord] = []
        self.throttle_s_per_chunk = 0.0  # sleep between 256 KiB chunks (to interrupt downloads)
        self.chunk_bytes = 256 << 10
        self.drop_after_bytes: int | None = None  # cut the connection mid-body (network loss)
        self.search_statuses: list[int] = []  # answer the next searches with these statuses
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> HubStandIn:
        stand_in = self

        class Handler(_Handler):
            hub = stand_in

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def add(self, repo: StandInRepo) -> StandInRepo:
        self.repos[repo.repo_id] = repo
        return repo

    def file_by_sha(self, sha256: str) -> tuple[StandInRepo, StandInFile] | None:
        for repo in self.repos.values():
            for f in repo.files:
                if f.sha256 == sha256:
                    return repo, f
        return None

    def ranges_requested(self, suffix: str) -> list[str]:
        """The Range headers of GET requests whose path ends with ``suffix``."""
        return [
            r.headers.get("range", "")
            for r in self.requests
            if r.method == "GET" and r.path.split("?")[0].endswith(suffix)
        ]


class _Handler(BaseHTTPRequestHandler):
    hub: HubStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # --- helpers -----------------------------------------------------------------------------
    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json({"error": message}, status, {"X-Error-Code": code, "X-Error-Message": message})

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else None

    def _repo_or_error(self, repo_id: str, *, for_files: bool) -> StandInRepo | None:
        repo = self.hub.repos.get(repo_id)
        token = self._token()
        if repo is None or (repo.private and token not in repo.allowed_tokens):
            status = 401 if token is None else 404
            self._error(status, "RepoNotFound", "Repository not found")
            return None
        if for_files and repo.gated and token not in repo.allowed_tokens:
            if token is None:
                self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must "
                    "have access to it and be authenticated to access it. Please log in.",
                )
            else:
                self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you "
                    "are not in the authorized list.",
                )
            return None
        return repo

    # --- routing -----------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._route()

    def do_GET(self) -> None:
        self._route()

    def _route(self) -> None:
        self.hub.requests.append(
            RequestRecord(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        )
        parsed = urlparse(self.path)
        path = unquote(parsed.path)
        query = parse_qs(parsed.query)
        try:
            if path == "/api/models":
                return self._search(query)
            if path.startswith("/api/models/"):
                return self._api_model(path[len("/api/models/") :], query)
            if path.startswith("/_cdn/"):
                return self._cdn(path[len("/_cdn/") :])
            if "/resolve/" in path:
                return self._resolve(path.lstrip("/"))
            self._error(404, "NotFound", "no such endpoint")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _search(self, query: dict[str, list[str]]) -> None:
        if self.hub.search_statuses:
            return self._error(self.hub.search_statuses.pop(0), "Unavailable", "try again")
        repos = list(self.hub.repos.values())
        text = (query.get("search") or [""])[0].lower()
        filters = query.get("filter") or []
        pipeline = query["pipeline_tag"][0] if query.get("pipeline_tag") else None
        found = [
            r
            for r in repos
            if text in r.repo_id.lower()
            and all(f in r.tags or f == r.library_name for f in filters)
            and (pipeline is None or r.pipeline_tag == pipeline)
            and not r.private
        ]
        sort = (query.get("sort") or ["downloads"])[0]
        key = {"downloads": "downloads", "likes": "likes", "lastModified": "last_modified"}.get(
            sort
        )
        if key:
            found.sort(key=lambda r: getattr(r, key), reverse=True)
        limit = int((query.get("limit") or ["1000"])[0])
        self._json([r.summary() for r in found[:limit]])

    def _api_model(self, rest: str, query: dict[str, list[str]]) -> None:
        if "/tree/" in rest:
            repo_id, _, _ = rest.partition("/tree/")
            repo = self._repo_or_error(repo_id, for_files=False)
            if repo is not None:
                self._json([_tree_entry(f) for f in repo.files])
            return
        repo_id = rest.partition("/revision/")[0]
        repo = self._repo_or_error(repo_id, for_files=False)
        if repo is None:
            return
        blobs = (query.get("blobs") or ["false"])[0].lower() == "true"
        siblings = []
        for f in repo.files:
            entry: dict[str, Any] = {"rfilename": f.path}
            if blobs:
                entry.update({"size": f.size, "blobId": f.blob_id})
                if f.lfs:
                    entry["lfs"] = {
                        "size": f.size,
                        "sha256": f.published_sha256,
                        "pointerSize": 134,
                    }
            siblings.append(entry)
        info = {**repo.summary(), "sha": repo.sha, "siblings": siblings}
        self._json(info)

    def _resolve(self, rest: str) -> None:
        repo_part, _, tail = rest.partition("/resolve/")
        _revision, _, filename = tail.partition("/")
        repo = self._repo_or_error(repo_part, for_files=True)
        if repo is None:
            return
        f = repo.file(filename)
        if f is None:
            self._json(
                {"error": "Entry not found"},
                404,
                {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": repo.sha},
            )
            return
        common = {"X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes"}
        if f.lfs:
            # as on the Hub: LFS files redirect to a CDN, with the real etag/size in X-Linked-*
            headers = {
                **common,
                "ETag": f'"{f.blob_id}"',
                "X-Linked-Etag": f'"{f.published_sha256}"',
                "X-Linked-Size": str(f.size),
                "Location": f"{self.hub.url}/_cdn/{f.sha256}",
            }
            self._send(302, b"", headers)
            return
        self._serve(f, {**common, "ETag": f'"{f.blob_id}"'})

    def _cdn(self, sha256: str) -> None:
        found = self.hub.file_by_sha(sha256)
        if found is None:
            self._error(404, "NotFound", "no such blob")
            return
        repo, f = found
        # same host as the API here, so huggingface_hub follows the redirect: carry the metadata
        headers = {
            "ETag": f'"{f.published_sha256}"',
            "X-Repo-Commit": repo.sha,
            "Accept-Ranges": "bytes",
        }
        self._serve(f, headers)

    def _serve(self, f: StandInFile, headers: dict[str, str]) -> None:
        size = f.size
        start, end = 0, size
        status = 200
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes="):
            first, _, last = range_header[6:].partition("-")
            start = int(first) if first else 0
            end = int(last) + 1 if last else size
            if start >= size:
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            end = min(end, size)
            status = 206
            headers = {**headers, "Content-Range": f"bytes {start}-{end - 1}/{size}"}
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        pos = start
        while pos < end:
            if self.hub.drop_after_bytes is not None and pos - start >= self.hub.drop_after_bytes:
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            chunk = f.read(pos, min(end, pos + self.hub.chunk_bytes))
            self.wfile.write(chunk)
            pos += len(chunk)
            if self.hub.throttle_s_per_chunk:
                time.sleep(self.hub.throttle_s_per_chunk)


def _tree_entry(f: StandInFile) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "file", "oid": f.blob_id, "size": f.size, "path": f.path}
    if f.lfs:
        entry["lfs"] = {"oid": f.published_sha256, "size": f.size, "pointerSize": 134}
    return entry
