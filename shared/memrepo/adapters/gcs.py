"""The Cloud Storage bundle store (``gs://bucket/prefix``).

Every write carries ``if_generation_match`` (0 when creating); see
https://cloud.google.com/storage/docs/request-preconditions. Reads pin the generation they listed,
so the bytes and the generation returned always belong together. Errors of
``google.api_core`` are translated into memrepo's tree: 412 → :class:`PreconditionFailed`,
429/5xx/timeouts/connection errors → :class:`StoreUnavailable`. The client is created lazily, once.
Set ``STORAGE_EMULATOR_HOST`` (read by google-cloud-storage itself) to use fake-gcs-server.
"""

from __future__ import annotations

import threading
from typing import Any

from memrepo.errors import PreconditionFailed, StoreUnavailable
from memrepo.store.base import BundleStore, StoredObject

CONTENT_TYPE = "application/octet-stream"
_READ_RACE_RETRIES = 5


def _translate(exc: Exception, what: str) -> Exception:
    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.PreconditionFailed):
        return PreconditionFailed(f"{what}: generation precondition failed")
    return StoreUnavailable(f"{what}: {type(exc).__name__}: {exc}")


class GCSStore(BundleStore):
    """A :class:`BundleStore` on a Cloud Storage bucket, under an optional key prefix."""

    def __init__(self, bucket: str, prefix: str = "", *, client: Any = None) -> None:
        """Args:
        bucket: the bucket name.
        prefix: a key prefix without leading or trailing ``/`` (may be empty).
        client: a ``google.cloud.storage.Client``; built on first use when omitted.
        """
        self.bucket_name = bucket
        self.prefix = prefix.strip("/")
        self.url = f"gs://{bucket}/{self.prefix}".rstrip("/")
        self._client = client
        self._bucket: Any = None
        self._lock = threading.Lock()

    def _b(self) -> Any:
        with self._lock:
            if self._bucket is None:
                if self._client is None:
                    from google.cloud import storage

                    self._client = storage.Client()
                self._bucket = self._client.bucket(self.bucket_name)
            return self._bucket

    def _name(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _get(self, key: str) -> StoredObject | None:
        from google.api_core import exceptions as gexc

        name = self._name(key)
        for _ in range(_READ_RACE_RETRIES):
            try:
                blob = self._b().get_blob(name)
                if blob is None:
                    return None
                data = blob.download_as_bytes(if_generation_match=blob.generation)
                return StoredObject(data=data, generation=int(blob.generation))
            except (gexc.PreconditionFailed, gexc.NotFound):
                continue  # replaced or deleted between metadata and download: read again
            except Exception as exc:  # noqa: BLE001 - translated below
                raise _translate(exc, f"get {name}") from exc
        raise StoreUnavailable(
            f"get {name}: object kept changing during {_READ_RACE_RETRIES} reads"
        )

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        name = self._name(key)
        blob = self._b().blob(name)
        try:
            blob.upload_from_string(
                data, content_type=CONTENT_TYPE, if_generation_match=if_generation_match
            )
        except Exception as exc:  # noqa: BLE001 - translated below
            raise _translate(exc, f"put {name}") from exc
        return int(blob.generation)

    def _delete(self, key: str, all_versions: bool) -> int:
        name = self._name(key)
        try:
            blobs = [b for b in self._client_list(name, versions=all_versions) if b.name == name]
            for blob in blobs:
                self._b().delete_blob(
                    blob.name, generation=blob.generation if all_versions else None
                )
            return len(blobs)
        except Exception as exc:  # noqa: BLE001 - translated below
            from google.api_core import exceptions as gexc

            if isinstance(exc, gexc.NotFound):
                return 0
            raise _translate(exc, f"delete {name}") from exc

    def _purge(self, prefix: str) -> int:
        full = self._name(prefix)
        try:
            blobs = self._client_list(full, versions=True)
            for blob in blobs:
                self._b().delete_blob(blob.name, generation=blob.generation)
            return len(blobs)
        except Exception as exc:  # noqa: BLE001 - translated below
            raise _translate(exc, f"purge {full}") from exc

    def _client_list(self, prefix: str, *, versions: bool = False) -> list[Any]:
        return list(self._b().list_blobs(prefix=prefix, versions=versions))

    def _list(self, prefix: str) -> list[str]:
        full = self._name(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        try:
            names = [b.name for b in self._client_list(full)]
        except Exception as exc:  # noqa: BLE001 - translated below
            raise _translate(exc, f"list {full}") from exc
        cut = len(self.prefix) + 1 if self.prefix else 0
        return [n[cut:] for n in names]
