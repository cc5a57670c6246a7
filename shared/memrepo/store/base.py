"""The bundle store port: a key-value object store with generation preconditions.

The semantics follow Cloud Storage (https://cloud.google.com/storage/docs/request-preconditions):
every stored object has a *generation*, a positive integer that changes on every write; a write
carries ``if_generation_match`` — ``0`` means "only if the object does not exist", ``G`` means
"only if the live generation is ``G``" — and fails with :class:`~memrepo.errors.PreconditionFailed`
otherwise. Objects are written whole: a reader sees the old or the new bytes, never a mix.

Backends implement four primitives (``_get``, ``_put``, ``_delete``, ``_list``); the public methods
here validate keys and are what the core calls.
"""

from __future__ import annotations

import builtins
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

from memrepo.errors import MemrepoError

_KEY = re.compile(r"[A-Za-z0-9_.@+=-]+(/[A-Za-z0-9_.@+=-]+)*")


@dataclass(frozen=True)
class StoredObject:
    """An object's bytes and the generation they were read at."""

    data: bytes
    generation: int


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative object key (no ``..``, no empty segment).

    Raises:
        ValueError: the key could escape its root or is malformed.
    """
    if not _KEY.fullmatch(key) or any(part in (".", "..") for part in key.split("/")):
        raise ValueError(f"unsafe object key {key!r}")
    return key


class BundleStore(ABC):
    """Port: where user bundles (and, later, manifests) live. See the module docstring."""

    #: A URL naming this store, e.g. ``gs://bucket/prefix`` or ``file:///var/memrepo``.
    url: str = ""

    def get(self, key: str) -> StoredObject | None:
        """Return the live object at ``key``, or ``None`` if there is none.

        Raises:
            StoreUnavailable: a transient backend failure.
        """
        return self._get(check_key(key))

    def put(self, key: str, data: bytes, *, if_generation_match: int) -> int:
        """Write ``data`` at ``key`` if the precondition holds; return the new generation.

        Args:
            key: the object key.
            data: the whole object, in bytes.
            if_generation_match: ``0`` to create, else the generation that must be live.

        Raises:
            PreconditionFailed: the live generation is not ``if_generation_match``.
            StoreUnavailable: a transient backend failure (the write may or may not have landed;
                a retry with the same precondition is safe).
        """
        if if_generation_match < 0:
            raise ValueError("if_generation_match must be >= 0")
        return self._put(check_key(key), data, if_generation_match)

    def delete(self, key: str, *, all_versions: bool = False) -> int:
        """Delete the object at ``key`` (and its noncurrent versions when asked).

        Returns:
            The number of object versions deleted (0 when nothing was there).

        Raises:
            StoreUnavailable: a transient backend failure.
        """
        return self._delete(check_key(key), all_versions)

    def list(self, prefix: str) -> list[str]:
        """Return the sorted keys of live objects under ``prefix`` (``"a/"`` lists ``a/...``).

        Raises:
            StoreUnavailable: a transient backend failure.
        """
        if prefix:
            check_key(prefix.rstrip("/"))
        return sorted(self._list(prefix))

    def purge(self, prefix: str) -> int:
        """Delete every version of every object under ``prefix``, live or noncurrent.

        On a versioned bucket, objects deleted earlier (old increments, replaced bases) live on as
        noncurrent versions until the lifecycle rule removes them; erasure (GDPR/CCPA) must not
        wait for that. See https://cloud.google.com/storage/docs/object-versioning.

        Args:
            prefix: a key prefix ending in ``/`` (``users/<id>/``); never empty.

        Returns:
            The number of object versions deleted.

        Raises:
            ValueError: an empty or unsafe prefix. StoreUnavailable: a transient failure.
        """
        if not prefix.endswith("/"):
            raise ValueError("purge needs a prefix ending in '/'")
        check_key(prefix.rstrip("/"))
        return self._purge(prefix)

    def _purge(self, prefix: str) -> int:
        """Default: delete the live objects listed under ``prefix`` with all their versions."""
        return sum(self._delete(k, True) for k in self._list(prefix))

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients or handles; the default does nothing."""

    @abstractmethod
    def _get(self, key: str) -> StoredObject | None: ...

    @abstractmethod
    def _put(self, key: str, data: bytes, if_generation_match: int) -> int: ...

    @abstractmethod
    def _delete(self, key: str, all_versions: bool) -> int: ...

    @abstractmethod
    def _list(self, prefix: str) -> builtins.list[str]: ...


class StoreConfigError(MemrepoError):
    """Raised when a store URL cannot be understood (a deployment error, not a transient one)."""

    permanent = True
