"""Identifiers that become paths, refs and object names: validation and slugs.

Rules (anything else is refused with :class:`InvalidEvent`, never turned into a path):

* ``user_id``: 1-128 characters from ``A-Z a-z 0-9 _ . @ + = -``, starting with a letter or digit,
  with no ``..``, not ending in ``.`` or ``.lock``. These rules keep the id a valid single git ref
  component (git-check-ref-format(1)) and a safe Cloud Storage object-name segment (no ``/``, no
  control characters, see https://cloud.google.com/storage/docs/objects#naming). Surrounding
  whitespace is an error, not trimmed: ``" Jason "`` and ``"Jason"`` must not silently merge two
  users. Non-ASCII ids (``"李雷"``) are refused: map platform names to stable ASCII ids (for
  example a phone number, a PSID, or a hash) before publishing.
* ``session_id``: 1-128 characters from ``A-Z a-z 0-9 _ . -``, same start/``..``/end rules; it
  names a transcript file ``sessions/YYYY/MM/<session_id>.md``.
* entity slugs are made in code from names (:func:`slugify`), never taken from input.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from memrepo.errors import InvalidEvent

MAX_ID_LENGTH = 128

_USER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+=-]{0,127}")
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def _check(value: object, pattern: re.Pattern[str], what: str, charset: str) -> str:
    if not isinstance(value, str):
        raise InvalidEvent(f"{what} must be a string, got {type(value).__name__}")
    if value == "":
        raise InvalidEvent(f"{what} is empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidEvent(f"{what} is {len(value)} characters long; at most {MAX_ID_LENGTH}")
    if value != value.strip():
        raise InvalidEvent(f"{what} {value!r} has leading or trailing whitespace")
    if (
        not pattern.fullmatch(value)
        or ".." in value
        or value.endswith(".")
        or value.endswith(".lock")
    ):
        raise InvalidEvent(
            f"{what} {value!r} is not allowed: use 1-{MAX_ID_LENGTH} characters from {charset}, "
            "starting with a letter or digit, without '..', not ending in '.' or '.lock'"
        )
    return value


def validate_user_id(value: object) -> str:
    """Return ``value`` if it is a valid user id (see the module docstring).

    Raises:
        InvalidEvent: with a message naming the rule that failed.
    """
    return _check(value, _USER_ID, "user_id", "A-Z a-z 0-9 _ . @ + = -")


def validate_session_id(value: object) -> str:
    """Return ``value`` if it is a valid session id (see the module docstring).

    Raises:
        InvalidEvent: with a message naming the rule that failed.
    """
    return _check(value, _SESSION_ID, "session_id", "A-Z a-z 0-9 _ . -")


def branch_for(user_id: str) -> str:
    """Return the branch name of a user's memory, ``user/<user_id>`` (validated)."""
    return f"user/{validate_user_id(user_id)}"


_SLUG_STRIP = re.compile(r"[^a-z0-9]+")


def slugify(name: str, *, max_length: int = 60) -> str:
    """Return a path-safe slug for an entity name: lowercase ASCII letters, digits and ``-``.

    Accents are folded (``Zoë`` → ``zoe``). A name with no ASCII letter or digit left (``李雷``)
    gets ``x-`` plus the first 10 hex digits of its SHA-256, so it still has a stable, safe slug.

    Args:
        name: free text from a transcript or a model.
        max_length: maximum slug length in characters.
    """
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = _SLUG_STRIP.sub("-", folded.lower()).strip("-")[:max_length].strip("-")
    if not slug:
        slug = "x-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:10]
    return slug
