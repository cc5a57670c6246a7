"""Bundle stores: the port and the factory that picks an adapter from ``MEMREPO_STORE``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from memrepo.store.base import BundleStore, StoreConfigError, StoredObject, check_key
from memrepo.store.filesystem import FilesystemStore

__all__ = [
    "BundleStore",
    "FilesystemStore",
    "StoreConfigError",
    "StoredObject",
    "check_key",
    "open_store",
]


def open_store(url: str) -> BundleStore:
    """Return the store named by ``url``.

    Args:
        url: ``gs://bucket[/prefix]`` (Cloud Storage) or ``file:///absolute/path`` (local
            filesystem). A plain path is accepted as a filesystem store too.

    Raises:
        StoreConfigError: the URL has another scheme or no bucket/path.
    """
    parsed = urlparse(url)
    if parsed.scheme == "gs":
        if not parsed.netloc:
            raise StoreConfigError(
                f"store URL {url!r} names no bucket (expected gs://bucket/prefix)"
            )
        from memrepo.adapters.gcs import GCSStore

        return GCSStore(parsed.netloc, parsed.path.strip("/"))
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path:
            raise StoreConfigError(f"store URL {url!r} must look like file:///absolute/path")
        return FilesystemStore(Path(unquote(parsed.path)))
    if parsed.scheme == "" and url:
        return FilesystemStore(Path(url))
    raise StoreConfigError(f"store URL {url!r}: expected gs://bucket/prefix or file:///path")
