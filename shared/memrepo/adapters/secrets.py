"""Reading a secret version from Secret Manager over its REST API (``google-auth``, lazily).

``access_secret(name)`` returns the text of ``projects/P/secrets/S/versions/V`` (``latest`` works)
using Application Default Credentials (the function's service account needs
``roles/secretmanager.secretAccessor`` on the secret). The REST call avoids a dependency on
``google-cloud-secret-manager``: ``GET https://secretmanager.googleapis.com/v1/<name>:access``
returns ``{"payload": {"data": <base64>}}``
(https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access).
The secret's value is never logged or put into an error message.
"""

from __future__ import annotations

import base64
import re
from typing import Any

from memrepo.errors import PermanentError, StoreUnavailable

_NAME = re.compile(r"projects/[^/]+/secrets/[^/]+/versions/[^/]+")
ENDPOINT = "https://secretmanager.googleapis.com/v1"


class SecretConfigError(PermanentError):
    """Raised when a secret version name is malformed."""


def access_secret(name: str, *, session: Any = None, timeout_s: float = 10.0) -> str:
    """Return the secret version ``name``'s payload as text (a trailing newline stripped).

    Args:
        name: ``projects/<project>/secrets/<secret>/versions/<version or latest>``.
        session: an ``AuthorizedSession``-like object with ``get(url, timeout=...)`` (built from
            Application Default Credentials when omitted).
        timeout_s: HTTP timeout in seconds.

    Raises:
        SecretConfigError: a malformed name.
        StoreUnavailable: the API failed or refused (status and reason only, never the value).
    """
    if not _NAME.fullmatch(name):
        raise SecretConfigError(f"secret name {name!r} must be projects/P/secrets/S/versions/V")
    if session is None:
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        credentials, _ = google.auth.default(
            scopes=["https://www.googleapis.com/auth/cloud-platform"]
        )
        session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
    try:
        response = session.get(f"{ENDPOINT}/{name}:access", timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - translated into the project's tree
        reason = type(exc).__name__
        raise StoreUnavailable(f"Secret Manager unreachable for {name}: {reason}") from None
    if response.status_code != 200:
        raise StoreUnavailable(f"Secret Manager answered {response.status_code} for {name}")
    data = response.json()["payload"]["data"]
    return base64.b64decode(data).decode("utf-8").rstrip("\n")
