"""Turn huggingface_hub / HTTP exceptions into HubError messages that say what to do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from backend.core.errors import QuantDeskError
from backend.hub.errors import (
    HubAccessError,
    HubConnectionError,
    HubError,
    HubNotFoundError,
)

LOGIN_HINT = "set HF_TOKEN to a token with read access (or run 'hf auth login')"


def _status(exc: HfHubHTTPError) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def translate(
    exc: BaseException, *, repo_id: str, endpoint: str, filename: str | None = None
) -> QuantDeskError:
    """A user-facing HubError for an exception raised while talking to the Hub."""
    page = f"{endpoint}/{repo_id}"
    what = f"{repo_id}/{filename}" if filename else repo_id
    if isinstance(exc, QuantDeskError):  # already user-facing (a HubError, a GGUFFormatError)
        return exc
    if isinstance(exc, GatedRepoError):
        if _status(exc) == 403:
            return HubAccessError(
                f"{repo_id} is a gated model and your account has not been granted access yet: "
                f"open {page}, accept its licence (approval may take a while), and check that "
                f"your token belongs to that account ({LOGIN_HINT})"
            )
        return HubAccessError(
            f"{repo_id} is a gated model: open {page}, log in and accept its licence, "
            f"then {LOGIN_HINT} and retry"
        )
    if isinstance(exc, RemoteEntryNotFoundError):
        return HubNotFoundError(f"file not found on the Hub: {what} (404)")
    if isinstance(exc, RevisionNotFoundError):
        return HubNotFoundError(f"revision not found in {repo_id} (404)")
    if isinstance(exc, RepositoryNotFoundError):
        return HubNotFoundError(
            f"repository {repo_id} not found on the Hub ({_status(exc) or 404}): check the name; "
            f"if it is private, {LOGIN_HINT}"
        )
    if isinstance(exc, OfflineModeIsEnabled):
        return HubConnectionError(
            "Hugging Face Hub access is disabled by offline mode: unset HF_HUB_OFFLINE to search "
            "or download"
        )
    if isinstance(exc, HfHubHTTPError):
        status = _status(exc)
        if status == 401:
            return HubAccessError(
                f"the Hub rejected your token for {what} (401): it is invalid or expired; "
                f"{LOGIN_HINT}"
            )
        if status == 403:
            return HubAccessError(
                f"the Hub refused access to {what} (403): your token lacks permission; for a gated "
                f"model accept its licence at {page}; {LOGIN_HINT}"
            )
        if status == 404:
            return HubNotFoundError(f"not found on the Hub: {what} (404)")
        if status == 429:
            return HubConnectionError(
                "the Hub is rate-limiting requests (429): wait a minute and retry"
            )
        return HubConnectionError(f"the Hub answered {status} for {what}: {exc}")
    if isinstance(exc, LocalEntryNotFoundError | httpx2.TransportError | ConnectionError):
        return HubConnectionError(f"cannot reach the Hugging Face Hub at {endpoint}: {exc}")
    return HubError(f"Hub request for {what} failed: {exc}")


@contextmanager
def hub_errors(*, repo_id: str, endpoint: str, filename: str | None = None) -> Iterator[None]:
    """Re-raise Hub and network exceptions inside the block as HubError subclasses."""
    try:
        yield
    except HubError:
        raise
    except (HfHubHTTPError, OfflineModeIsEnabled, LocalEntryNotFoundError, httpx2.HTTPError) as exc:
        raise translate(exc, repo_id=repo_id, endpoint=endpoint, filename=filename) from exc
    except ConnectionError as exc:
        raise translate(exc, repo_id=repo_id, endpoint=endpoint, filename=filename) from exc
