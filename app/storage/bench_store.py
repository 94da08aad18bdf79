"""Bench runs kept as JSON under ``quantdesk_home()/bench`` so earlier runs can be compared."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from backend.bench import BenchResult, write_json_atomic
from backend.settings.paths import subdir

log = logging.getLogger(__name__)


class BenchStore:
    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or subdir("bench")
        self.folder.mkdir(parents=True, exist_ok=True)

    def save(self, result: BenchResult) -> Path:
        stamp = re.sub(r"[^0-9A-Za-z]+", "-", result.started_at or "run").strip("-")
        path = self.folder / f"{stamp}.json"
        n = 1
        while path.exists():
            n += 1
            path = self.folder / f"{stamp}-{n}.json"
        return write_json_atomic(result.to_dict(), path)

    def load_all(self) -> list[tuple[Path, BenchResult]]:
        runs = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                runs.append((path, BenchResult.from_dict(json.loads(path.read_text("utf-8")))))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping unreadable bench run %s: %s", path.name, exc)
        return runs

    def delete(self, path: Path) -> None:
        path.unlink(missing_ok=True)
