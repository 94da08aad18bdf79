"""Where media bytes may come from: inline always; local files only under --media-path
(never outside it); remote URLs only with --allow-remote-media, with a byte limit that
stops the download. The remote server here is a local HTTP server."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.server.media_sources import media_bytes
from backend.settings.media_settings import MediaKnobs, MediaLimits
from tests.media.image_files import data_url, picture

PNG = picture("red-square")


def test_inline_data_urls_are_always_read() -> None:
    assert media_bytes(data_url(PNG), MediaLimits(), "x") == PNG
    with pytest.raises(MediaError, match="not image"):
        media_bytes(data_url(PNG, "text/plain"), MediaLimits(), "x")


def test_local_files_only_under_the_media_path(tmp_path: Path) -> None:
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "a.png").write_bytes(PNG)
    (tmp_path.parent / "secret.png").write_bytes(PNG)
    with pytest.raises(MediaError, match="--media-path"):
        media_bytes("file://shots/a.png", MediaLimits(), "x")

    limits = MediaKnobs(media_path=str(tmp_path)).media_limits()
    assert media_bytes("file://shots/a.png", limits, "x") == PNG
    assert media_bytes(f"file://{tmp_path}/shots/a.png", limits, "x") == PNG
    for outside in ("file://../secret.png", f"file://{tmp_path.parent}/secret.png"):
        with pytest.raises(MediaError, match="outside"):
            media_bytes(outside, limits, "x")
    with pytest.raises(MediaError, match="no file"):
        media_bytes("file://shots/missing.png", limits, "x")
    with pytest.raises(MediaTooLargeError):
        media_bytes("file://shots/a.png", MediaLimits(max_bytes=10, media_dir=tmp_path), "x")


class _Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/a.png":
            body = PNG
        elif self.path == "/endless":
            self.send_response(200)
            self.end_headers()
            try:
                while True:  # a server that never stops sending
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                return
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def files_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_remote_urls_only_when_allowed_and_never_past_the_limit(files_url: str) -> None:
    with pytest.raises(MediaError, match="--allow-remote-media"):
        media_bytes(f"{files_url}/a.png", MediaLimits(), "x")
    allowed = MediaKnobs(allow_remote_media=True).media_limits()
    assert media_bytes(f"{files_url}/a.png", allowed, "x") == PNG
    with pytest.raises(MediaError, match="HTTP 404"):
        media_bytes(f"{files_url}/gone.png", allowed, "x")
    with pytest.raises(MediaTooLargeError):
        media_bytes(f"{files_url}/endless", MediaLimits(max_bytes=1 << 20, allow_remote=True), "x")
