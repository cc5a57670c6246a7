"""Fakes that implement the same ports as the real adapters (no mocks).

``InMemoryStore`` is a :class:`BundleStore` with Cloud Storage's generation semantics and
fault injection: a hook may raise before a primitive runs, to simulate 503s, 429s or a concurrent
writer landing first.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from memrepo.errors import PreconditionFailed
from memrepo.store.base import BundleStore, StoredObject


class InMemoryStore(BundleStore):
    """A thread-safe in-memory :class:`BundleStore` that keeps noncurrent versions."""

    def __init__(self) -> None:
        self.url = "memory://"
        self.objects: dict[str, StoredObject] = {}
        self.noncurrent: dict[str, list[StoredObject]] = {}
        self.calls: list[tuple[str, str]] = []
        self.before: Callable[[str, str], None] | None = None
        self._lock = threading.Lock()
        self._generations = itertools.count(1000)

    def _hook(self, op: str, key: str) -> None:
        self.calls.append((op, key))
        if self.before is not None:
            self.before(op, key)

    def _get(self, key: str) -> StoredObject | None:
        self._hook("get", key)
        with self._lock:
            return self.objects.get(key)

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        self._hook("put", key)
        with self._lock:
            live = self.objects.get(key)
            if (live.generation if live else 0) != if_generation_match:
                raise PreconditionFailed(f"{key}: precondition {if_generation_match} failed")
            if live:
                self.noncurrent.setdefault(key, []).append(live)
            generation = next(self._generations)
            self.objects[key] = StoredObject(data, generation)
            return generation

    def _delete(self, key: str, all_versions: bool) -> int:
        self._hook("delete", key)
        with self._lock:
            count = int(self.objects.pop(key, None) is not None)
            if all_versions:
                count += len(self.noncurrent.pop(key, []))
            return count

    def _list(self, prefix: str) -> list[str]:
        self._hook("list", prefix)
        with self._lock:
            return [k for k in self.objects if k.startswith(prefix)]
