"""User repositories on a bundle store: where a user's bundle lives, hydrate it, save it back.

Object layout in the store: ``users/<user_id>/memory.bundle``, one full bundle of the branch
``user/<user_id>``. Saving is an optimistic-concurrency write: the bundle is uploaded with
``if_generation_match`` equal to the generation it was hydrated from (0 for a new user), so a save
never overwrites a newer state (invariant 1 of DESIGN.md).
"""

from __future__ import annotations

import logging
from pathlib import Path

from memrepo.ids import validate_user_id
from memrepo.store.base import BundleStore
from memrepo.workspace import Workspace

log = logging.getLogger(__name__)


class UserRepos:
    """Hydrate and save user repositories on a :class:`BundleStore`."""

    def __init__(self, store: BundleStore, *, tmp_root: Path | None = None) -> None:
        """Args:
        store: where bundles live.
        tmp_root: where workspaces are created (default: the system temp dir).
        """
        self.store = store
        self.tmp_root = tmp_root

    @staticmethod
    def key(user_id: str) -> str:
        """Return the object key of a user's bundle (the id validated)."""
        return f"users/{validate_user_id(user_id)}/memory.bundle"

    def checkout(self, user_id: str) -> tuple[Workspace, int]:
        """Return a fresh workspace of the user's memory and the generation it came from.

        The generation is 0 when the user has no bundle yet (the workspace is then empty).

        Raises:
            InvalidEvent: invalid user id. CorruptBundle: the stored bundle is unusable.
            StoreUnavailable: the store failed transiently.
        """
        stored = self.store.get(self.key(user_id))
        ws = Workspace.hydrate(stored.data if stored else None, user_id, tmp_root=self.tmp_root)
        return ws, stored.generation if stored else 0

    def save(self, ws: Workspace, generation: int) -> int:
        """Upload the workspace's bundle if the stored generation is still ``generation``.

        Returns:
            The new generation.

        Raises:
            PreconditionFailed: another writer saved first. StoreUnavailable: transient failure.
        """
        return self.store.put(self.key(ws.user_id), ws.bundle(), if_generation_match=generation)

    def export(self, user_id: str) -> bytes | None:
        """Return the user's bundle bytes (``git clone`` can read them), or ``None``."""
        stored = self.store.get(self.key(user_id))
        return stored.data if stored else None

    def delete(self, user_id: str) -> int:
        """Delete every object of the user (noncurrent versions included); return the count."""
        prefix = f"users/{validate_user_id(user_id)}/"
        return sum(self.store.delete(k, all_versions=True) for k in self.store.list(prefix))
