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
            live = self.objects.pop(key, None)
            count = int(live is not None)
            if all_versions:
                count += len(self.noncurrent.pop(key, []))
            elif live is not None:  # a versioned bucket keeps the deleted version as noncurrent
                self.noncurrent.setdefault(key, []).append(live)
            return count

    def _purge(self, prefix: str) -> int:
        self._hook("purge", prefix)
        with self._lock:
            keys = {k for k in [*self.objects, *self.noncurrent] if k.startswith(prefix)}
            count = 0
            for key in keys:
                count += int(self.objects.pop(key, None) is not None)
                count += len(self.noncurrent.pop(key, []))
            return count

    def _list(self, prefix: str) -> list[str]:
        self._hook("list", prefix)
        with self._lock:
            return [k for k in self.objects if k.startswith(prefix)]


class SimulatedCrash(BaseException):
    """Raised by :class:`CrashingStore` in place of a process dying: a ``BaseException``, so no
    ``except Exception`` in the code under test can absorb it."""


class CrashingStore(BundleStore):
    """A :class:`BundleStore` wrapper that "crashes" at a chosen step and records every step.

    ``steps`` lists ``(op, key)`` of every primitive call (``get``, ``put``, ``delete``,
    ``list``). ``crash_at`` is the index, counted over the calls whose op is in ``ops``, of the
    call that raises :class:`SimulatedCrash` *before* reaching the inner store.
    """

    def __init__(
        self, inner: BundleStore, *, crash_at: int | None = None,
        ops: tuple[str, ...] = ("put", "delete"),
    ) -> None:
        self.inner = inner
        self.url = inner.url
        self.crash_at = crash_at
        self.ops = ops
        self.steps: list[tuple[str, str]] = []
        self._counted = 0
        self._lock = threading.Lock()

    def _step(self, op: str, key: str) -> None:
        with self._lock:
            self.steps.append((op, key))
            if op not in self.ops:
                return
            index = self._counted
            self._counted += 1
        if index == self.crash_at:
            raise SimulatedCrash(f"crash before {op} {key}")

    def _get(self, key: str) -> StoredObject | None:
        self._step("get", key)
        return self.inner.get(key)

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        self._step("put", key)
        return self.inner.put(key, data, if_generation_match=if_generation_match)

    def _delete(self, key: str, all_versions: bool) -> int:
        self._step("delete", key)
        return self.inner.delete(key, all_versions=all_versions)

    def _purge(self, prefix: str) -> int:
        self._step("purge", prefix)
        return self.inner.purge(prefix)

    def _list(self, prefix: str) -> list[str]:
        self._step("list", prefix)
        return self.inner.list(prefix)
