"""Where a request's media bytes come from: inline base64, a local file, or a remote URL.

- ``data:`` URLs and bare base64 (as llama-server takes) are always read.
- ``file://`` URLs are read only under ``--media-path DIR`` (llama-server's flag): a path
  relative to DIR, or an absolute one inside it. Nothing outside DIR is ever opened.
- ``http(s)://`` URLs are fetched only with ``--allow-remote-media``: a local server must
  not fetch URLs for whoever can reach it. Fetches have a deadline, follow few redirects
  and stop reading past the byte limit.

These run on the request's preparation thread, never on the event loop.
"""

from __future__ import annotations

import base64
import binascii
import time
from urllib.parse import unquote, urlsplit

import httpx

from backend.engine.media.media_errors import MediaError, MediaTooLargeError
from backend.settings.media_settings import MediaLimits

FETCH_TIMEOUT_S = 15.0
_MAX_REDIRECTS = 3


def media_bytes(url: str, limits: MediaLimits, where: str, kind: str = "image") -> bytes:
    """The bytes ``url`` names (see the module docstring); MediaError (400) for a source
    this server does not read, MediaTooLargeError (413) past ``limits.max_bytes``."""
    if url.startswith(("http://", "https://")):
        return _remote(url, limits, where)
    if url.startswith("file:"):
        return _local(url, limits, where)
    payload = url
    if url.startswith("data:"):
        head, sep, payload = url.partition(",")
        if not sep or not head.endswith(";base64"):
            raise MediaError(f"{where}: a data: URL must be base64-encoded", param=where)
        mime = head[len("data:") : -len(";base64")]
        if mime and not mime.startswith(f"{kind}/"):
            raise MediaError(f"{where}: a data: URL of type {mime} is not {kind}", param=where)
    return decode_base64(payload, where, kind)


def decode_base64(payload: str, where: str, kind: str = "image") -> bytes:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise MediaError(f"{where}: the {kind} is not valid base64", param=where) from None


def _too_large(where: str, limits: MediaLimits) -> MediaTooLargeError:
    return MediaTooLargeError(
        f"{where}: the file is over the limit of {limits.max_bytes} bytes", param=where
    )


def _local(url: str, limits: MediaLimits, where: str) -> bytes:
    if limits.media_dir is None:
        raise MediaError(
            f"{where}: this server reads no local files; start it with --media-path DIR to "
            "let requests name files under DIR (file://NAME)",
            param=where,
        )
    parts = urlsplit(url)
    relative = unquote(parts.netloc + parts.path)
    root = limits.media_dir.resolve()
    try:
        path = (root / relative).resolve()  # an absolute path replaces root here
    except (ValueError, OSError):  # a NUL byte, a name the system refuses
        raise MediaError(f"{where}: {relative!r} is not a file name", param=where) from None
    if not path.is_relative_to(root):
        raise MediaError(f"{where}: {relative} is outside the --media-path folder", param=where)
    if not path.is_file():
        raise MediaError(f"{where}: no file {relative} under the --media-path folder", param=where)
    if path.stat().st_size > limits.max_bytes:
        raise _too_large(where, limits)
    return path.read_bytes()


def _remote(url: str, limits: MediaLimits, where: str) -> bytes:
    if not limits.allow_remote:
        raise MediaError(
            f"{where}: this local server does not fetch remote URLs (start it with "
            "--allow-remote-media to allow it); send the file inline, as a data: URL "
            "(data:image/png;base64,...)",
            param=where,
        )
    try:
        with (
            httpx.Client(
                timeout=FETCH_TIMEOUT_S, follow_redirects=True, max_redirects=_MAX_REDIRECTS
            ) as client,
            client.stream("GET", url) as response,
        ):
            if response.status_code != 200:
                raise MediaError(
                    f"{where}: fetching {url} answered HTTP {response.status_code}", param=where
                )
            data = bytearray()
            deadline = time.monotonic() + FETCH_TIMEOUT_S  # for the whole file, not a read
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > limits.max_bytes:
                    raise _too_large(where, limits)
                if time.monotonic() > deadline:
                    raise MediaError(
                        f"{where}: fetching {url} took longer than {FETCH_TIMEOUT_S:g} s",
                        param=where,
                    )
            return bytes(data)
    except httpx.HTTPError as exc:
        raise MediaError(f"{where}: could not fetch {url} ({exc})", param=where) from None
