"""The manifest of a user's stored memory: one base bundle plus a chain of incremental bundles.

Object layout in the store (all under ``users/<user_id>/``)::

    manifest.json                                  the only object written with a generation
                                                   precondition (if_generation_match=G, 0 to create)
    bundles/<unix_ms>-<kind>-<sha256[:24]>-<nonce>.bundle
                                                   immutable parts, written once with
                                                   if_generation_match=0 before the manifest
    memory.bundle                                  legacy layout (one full bundle), read when no
                                                   manifest exists and removed by the next write

The manifest is JSON (format 1)::

    {"format": 1, "user_id": "ana", "branch": "user/ana",
     "base": {"key": "users/ana/bundles/...-base-....bundle", "tip": "<40 hex>",
              "size": 123456, "sha256": "<64 hex>", "prerequisites": []},
     "increments": [{"key": "...-inc-....bundle", "tip": "<40 hex>", "size": 2300,
                     "sha256": "<64 hex>", "prerequisites": ["<tip of the part before>"]}, ...]}

The base is a full bundle (git-bundle(1): no prerequisites) of ``refs/heads/user/<user_id>``;
each increment is ``git bundle create inc.bundle <previous tip>..refs/heads/user/<user_id>``, so
its prerequisite is the tip of the part before it. Applying the parts in order reproduces the
branch at the manifest's tip. A reader reads the manifest first and then only the immutable parts
it names, so it sees one whole state, old or new, never a mix
(https://cloud.google.com/storage/docs/request-preconditions).

Part names carry the writer's wall-clock time in milliseconds, so garbage collection can leave
young unreferenced parts alone (they may belong to a write whose manifest has not landed yet),
part of the content hash, and a random nonce: two writers never share a part, even when they
made byte-identical commits (the same session delivered twice in the same second), so a writer
that lost the race may delete what it uploaded without touching the winner's parts.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from memrepo.errors import CorruptBundle
from memrepo.ids import branch_for, validate_user_id

FORMAT = 1
MANIFEST_NAME = "manifest.json"
LEGACY_NAME = "memory.bundle"
PARTS_DIR = "bundles"

_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_PART_NAME = re.compile(
    r"(?P<ms>\d{13})-(?P<kind>base|inc)-(?P<digest>[0-9a-f]{24})-(?P<nonce>[0-9a-f]{8})\.bundle"
)

PartKind = Literal["base", "inc"]


class CorruptManifest(CorruptBundle):
    """Raised when a stored manifest is not valid JSON of the expected shape (permanent)."""


def user_prefix(user_id: str) -> str:
    """Return ``users/<user_id>/``, the prefix of every object of the user (id validated).

    Raises:
        InvalidEvent: the user id is invalid.
    """
    return f"users/{validate_user_id(user_id)}/"


def manifest_key(user_id: str) -> str:
    """Return the manifest's object key, ``users/<user_id>/manifest.json``."""
    return user_prefix(user_id) + MANIFEST_NAME


def legacy_key(user_id: str) -> str:
    """Return the legacy single-bundle key, ``users/<user_id>/memory.bundle``."""
    return user_prefix(user_id) + LEGACY_NAME


def part_key(user_id: str, kind: PartKind, data: bytes, now_ms: int) -> str:
    """Return a new, unique part key: ``users/<id>/bundles/<now_ms>-<kind>-<hash>-<nonce>.bundle``.

    Args:
        user_id: the owner.
        kind: ``base`` (a full bundle) or ``inc`` (an incremental one).
        data: the bundle bytes (the first 24 hex digits of their SHA-256 go into the name).
        now_ms: the writer's clock in Unix milliseconds (13 digits until the year 2286).
    """
    digest = hashlib.sha256(data).hexdigest()[:24]
    nonce = secrets.token_hex(4)
    return f"{user_prefix(user_id)}{PARTS_DIR}/{now_ms:013d}-{kind}-{digest}-{nonce}.bundle"


def part_created_ms(key: str) -> int | None:
    """Return the creation time (Unix ms) encoded in a part key, or ``None`` if it is no part."""
    found = _PART_NAME.fullmatch(key.rsplit("/", 1)[-1])
    return int(found.group("ms")) if found else None


@dataclass(frozen=True)
class Part:
    """One stored bundle of the chain.

    Attributes:
        key: the object key.
        tip: the commit ``refs/heads/user/<id>`` points to in this bundle (40 hex).
        size: the bundle's length in bytes.
        sha256: the hex SHA-256 of the bundle's bytes, checked on every download.
        prerequisites: commits the bundle requires (git-bundle(1)); empty for a base.
    """

    key: str
    tip: str
    size: int
    sha256: str
    prerequisites: tuple[str, ...] = ()

    @classmethod
    def of(cls, key: str, tip: str, data: bytes, prerequisites: tuple[str, ...] = ()) -> Part:
        """Return the part describing ``data`` stored at ``key``."""
        return cls(key, tip, len(data), hashlib.sha256(data).hexdigest(), prerequisites)

    def check(self, data: bytes) -> None:
        """Raise :class:`CorruptBundle` unless ``data`` has this part's size and SHA-256."""
        if len(data) != self.size or hashlib.sha256(data).hexdigest() != self.sha256:
            raise CorruptBundle(
                f"{self.key}: {len(data)} bytes do not match the manifest "
                f"({self.size} bytes, sha256 {self.sha256[:12]}...)"
            )

    def to_json(self) -> dict[str, Any]:
        """Return the JSON object of this part."""
        return {"key": self.key, "tip": self.tip, "size": self.size, "sha256": self.sha256,
                "prerequisites": list(self.prerequisites)}

    @classmethod
    def from_json(cls, raw: Any, prefix: str) -> Part:
        """Parse a part object; ``prefix`` is the owner's ``users/<id>/``.

        Raises:
            CorruptManifest: a field is missing, mistyped, or the key is outside ``prefix``.
        """
        try:
            part = cls(str(raw["key"]), str(raw["tip"]), int(raw["size"]), str(raw["sha256"]),
                       tuple(str(p) for p in raw.get("prerequisites", ())))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptManifest(f"manifest part {raw!r:.200} is malformed: {exc}") from exc
        if not part.key.startswith(prefix) or ".." in part.key.split("/"):
            raise CorruptManifest(f"manifest part {part.key!r} is outside {prefix!r}")
        if not _SHA1.fullmatch(part.tip) or not _SHA256.fullmatch(part.sha256) or part.size <= 0:
            raise CorruptManifest(f"manifest part {part.key!r} has a bad tip, hash or size")
        if not all(_SHA1.fullmatch(p) for p in part.prerequisites):
            raise CorruptManifest(f"manifest part {part.key!r} has a bad prerequisite")
        return part


@dataclass(frozen=True)
class Manifest:
    """A user's stored state: a base bundle and the increments on top of it, in order."""

    user_id: str
    base: Part
    increments: tuple[Part, ...] = field(default=())

    @property
    def tip(self) -> str:
        """The commit at the branch tip of the whole chain."""
        return self.increments[-1].tip if self.increments else self.base.tip

    @property
    def parts(self) -> tuple[Part, ...]:
        """The base then the increments, in the order they are applied."""
        return (self.base, *self.increments)

    @property
    def increment_bytes(self) -> int:
        """The total size of the increments, in bytes."""
        return sum(p.size for p in self.increments)

    def keys(self) -> set[str]:
        """Return the keys of every part the manifest references."""
        return {p.key for p in self.parts}

    def needs_compaction(self, max_increments: int) -> bool:
        """Whether the next write should start a new base instead of adding an increment.

        True when the chain already holds ``max_increments`` increments or the increments
        together outweigh the base (so the bytes a cold reader downloads stay under twice the
        size of one full bundle, and compaction costs are amortised geometrically).
        """
        return len(self.increments) >= max_increments or self.increment_bytes > self.base.size

    def with_increment(self, part: Part) -> Manifest:
        """Return this manifest with ``part`` appended to the chain."""
        return replace(self, increments=(*self.increments, part))

    def to_bytes(self) -> bytes:
        """Return the manifest's JSON bytes (UTF-8, keys sorted, one line)."""
        body = {
            "format": FORMAT,
            "user_id": self.user_id,
            "branch": branch_for(self.user_id),
            "base": self.base.to_json(),
            "increments": [p.to_json() for p in self.increments],
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, user_id: str) -> Manifest:
        """Parse and validate a stored manifest of ``user_id``.

        Raises:
            CorruptManifest: not JSON, another format version, another user, or a bad part.
        """
        try:
            raw = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptManifest(f"manifest of {user_id} is not JSON: {exc}") from exc
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
            raise CorruptManifest(
                f"manifest of {user_id}: expected format {FORMAT}, found {found!r}"
            )
        if raw.get("user_id") != user_id or raw.get("branch") != branch_for(user_id):
            raise CorruptManifest(
                f"manifest of {user_id} names user {raw.get('user_id')!r}, "
                f"branch {raw.get('branch')!r}"
            )
        prefix = user_prefix(user_id)
        increments = raw.get("increments")
        if not isinstance(increments, list):
            raise CorruptManifest(f"manifest of {user_id}: increments must be a list")
        manifest = cls(user_id, Part.from_json(raw.get("base"), prefix),
                       tuple(Part.from_json(p, prefix) for p in increments))
        if manifest.base.prerequisites:
            raise CorruptManifest(f"manifest of {user_id}: the base has prerequisites")
        return manifest
