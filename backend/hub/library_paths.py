"""Where downloads live in the library folder: one folder per repo, unfinished files under
``.downloads/``, and the record of where each repo's files came from."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from backend.hub.errors import DownloadError
from backend.hub.hub_search import HubFile, RepoListing

PARTIAL_DIR = ".downloads"
SOURCE_FILE = ".quantdesk-source.json"
# What the quantiser and the converter write before renaming it into the library
# (quantize.output_files.part_path); they hold sole_writer() on it while they do.
OUTPUT_PART_GLOB = "*.gguf.part"


def repo_folder_name(repo_id: str) -> str:
    """``owner/name`` -> ``owner--name`` (one folder per repo in the library)."""
    return repo_id.replace("/", "--")


def safe_relative(filename: str) -> Path:
    """A Hub file name as a path inside its repo's folder; DownloadError for one that would
    leave it (absolute, or with ``..``)."""
    rel = Path(filename)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise DownloadError(f"refusing unsafe file name from the Hub: {filename!r}")
    return rel


def write_source_record(library: Path, listing: RepoListing, files: list[HubFile]) -> None:
    """Add ``files`` (size, SHA-256, revision) to their repo folder's source record."""
    folder = library / repo_folder_name(listing.repo_id)
    record_path = folder / SOURCE_FILE
    record: dict[str, Any] = {
        "repo_id": listing.repo_id,
        "revision": listing.revision,
        "files": {},
    }
    if record_path.exists():
        with contextlib.suppress(OSError, ValueError):
            record["files"] = json.loads(record_path.read_text()).get("files", {})
    for f in files:
        record["files"][f.path] = {
            "size": f.size,
            "sha256": f.sha256,
            "revision": listing.revision,
        }
    tmp = record_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2))
    os.replace(tmp, record_path)
