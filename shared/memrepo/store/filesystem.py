"""The filesystem bundle store: the embedded default, with Cloud Storage's precondition rules.

Each object is one file holding an 8-byte big-endian generation header and the data, replaced by
``os.replace`` after an ``fsync`` (POSIX rename is atomic), so a reader sees the old or the new
object, never half of one, and a crash leaves the previous object intact. Writers of one key are
serialised by an ``fcntl.flock`` on a lock file under ``<root>/.locks/``; this works across
processes of one machine (not across NFS clients).
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memrepo.errors import PreconditionFailed, StoreUnavailable
from memrepo.store.base import BundleStore, StoredObject

_HEADER = 8


class FilesystemStore(BundleStore):
    """A :class:`BundleStore` in a local directory (``file:///path``)."""

    def __init__(self, root: Path) -> None:
        """Args:
        root: the directory holding the objects; created if missing.
        """
        self.root = Path(root)
        self.url = self.root.resolve().as_uri()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.root / "objects" / key

    @contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        lock_path = self.root / ".locks" / (key.replace("/", "%") + ".lock")
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _read(self, path: Path) -> StoredObject | None:
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {path}: {exc}") from exc
        return StoredObject(data=blob[_HEADER:], generation=int.from_bytes(blob[:_HEADER], "big"))

    def _get(self, key: str) -> StoredObject | None:
        return self._read(self._path(key))

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock(key):
                current = self._read(path)
                live = current.generation if current else 0
                if live != if_generation_match:
                    raise PreconditionFailed(
                        f"{key}: live generation is {live}, write expected {if_generation_match}"
                    )
                generation = max(time.time_ns() // 1000, live + 1)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(generation.to_bytes(_HEADER, "big"))
                        out.write(data)
                        out.flush()
                        os.fsync(out.fileno())
                    os.replace(tmp, path)
                except BaseException:
                    Path(tmp).unlink(missing_ok=True)
                    raise
                dir_fd = os.open(path.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
                return generation
        except OSError as exc:
            raise StoreUnavailable(f"cannot write {key}: {exc}") from exc

    def _delete(self, key: str, all_versions: bool) -> int:
        path = self._path(key)
        with self._lock(key):
            try:
                path.unlink()
            except FileNotFoundError:
                return 0
            except OSError as exc:
                raise StoreUnavailable(f"cannot delete {key}: {exc}") from exc
        return 1

    def _list(self, prefix: str) -> list[str]:
        base = self.root / "objects"
        if not base.exists():
            return []
        keys = []
        for path in base.rglob("*"):
            if path.is_file() and not path.name.startswith(".tmp-"):
                key = path.relative_to(base).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return keys
