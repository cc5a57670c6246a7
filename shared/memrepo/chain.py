"""Git side of the bundle chain: create base and incremental bundles, apply stored parts.

Facts relied on (git-bundle(1), "BUNDLE FORMAT" of gitformat-bundle(5)):

* a bundle starts with ``# v2 git bundle`` (or ``# v3 git bundle`` plus ``@capability`` lines),
  then one ``-<commit>`` line per prerequisite and one ``<commit> <refname>`` line per ref, then an
  empty line and a pack;
* ``git bundle create f <old>..<ref>`` writes the commits reachable from ``<ref>`` but not from
  ``<old>``, with ``<old>`` as prerequisite; it refuses an empty range;
* ``git bundle unbundle f`` checks the prerequisites are in the repository, stores the pack
  (``index-pack --fix-thin``) and prints the refs; it moves no ref (the caller does).

Every part downloaded is checked against the manifest's size and SHA-256 before git reads it, and
its header must name exactly ``refs/heads/user/<user_id>`` at the manifest's tip (isolation,
DESIGN.md invariant 3).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from memrepo.errors import CorruptBundle
from memrepo.gitcli import git
from memrepo.manifest import Part
from memrepo.store.base import BundleStore

log = logging.getLogger(__name__)

_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_MAX_HEADER = 1 << 20


class PartMissing(LookupError):
    """Raised when a part the manifest names is gone (compacted away since the manifest was read).

    Not a :class:`~memrepo.errors.MemrepoError`: the caller reads the manifest again, and only if
    the part is still referenced is that a :class:`~memrepo.errors.CorruptBundle`.
    """

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def bundle_header(data: bytes) -> tuple[dict[str, str], tuple[str, ...]]:
    """Return ``(refs, prerequisites)`` of a bundle: ``{refname: commit}`` and commit ids.

    Args:
        data: the bundle's bytes (only the header, up to 1 MiB, is read).

    Raises:
        CorruptBundle: no bundle signature or no end of header.
    """
    if not data.startswith(_SIGNATURES):
        raise CorruptBundle("not a git bundle (no v2/v3 signature)")
    end = data.find(b"\n\n", 0, _MAX_HEADER)
    if end < 0:
        raise CorruptBundle("git bundle header has no end")
    refs: dict[str, str] = {}
    prerequisites: list[str] = []
    for line in data[: end + 1].decode("utf-8", "replace").splitlines()[1:]:
        if line.startswith("@"):
            continue
        if line.startswith("-"):
            prerequisites.append(line[1:].split(" ", 1)[0])
            continue
        commit, _, name = line.partition(" ")
        refs[name] = commit
    return refs, tuple(prerequisites)


def check_part(data: bytes, part: Part, ref: str) -> None:
    """Check a downloaded part against the manifest and the owner's ref.

    Raises:
        CorruptBundle: wrong size or hash, not a bundle, or refs other than ``{ref: part.tip}``.
    """
    part.check(data)
    refs, _ = bundle_header(data)
    if refs != {ref: part.tip}:
        raise CorruptBundle(
            f"{part.key} holds refs {sorted(refs)}, expected only {ref} at {part.tip[:12]}"
        )


def apply_bundle(cwd: Path, bundle_file: Path, what: str) -> None:
    """Store the objects of ``bundle_file`` in the repository at ``cwd`` (no ref moves).

    Raises:
        CorruptBundle: git cannot verify or unpack it (missing prerequisite, broken pack).
    """
    proc = git(["bundle", "unbundle", str(bundle_file)], cwd, check=False)
    if proc.returncode != 0:
        raise CorruptBundle(
            f"{what} cannot be applied: {proc.stderr.decode('utf-8', 'replace').strip()[:300]}"
        )


def fetch_parts(
    cwd: Path,
    parts: Sequence[Part],
    store: BundleStore,
    ref: str,
    *,
    prefetched: Mapping[str, bytes] | None = None,
    scratch: Path | None = None,
) -> int:
    """Download ``parts`` (in order) and apply them to the repository at ``cwd``.

    The caller moves ``ref`` to the last part's tip afterwards.

    Args:
        cwd: a repository (bare or not) holding every prerequisite of ``parts[0]``.
        parts: the parts to apply, oldest first.
        store: where they are.
        ref: the owner's ref, ``refs/heads/user/<id>``.
        prefetched: bytes already in hand by key (a writer's own upload), not downloaded again.
        scratch: where the downloaded file is kept while git reads it (default: ``cwd``).

    Returns:
        The bytes downloaded from the store.

    Raises:
        PartMissing: a part is not in the store. CorruptBundle: a part fails its checks.
        StoreUnavailable: the store failed transiently.
    """
    downloaded = 0
    with tempfile.TemporaryDirectory(prefix="memrepo-part-", dir=scratch or cwd) as tmp:
        for part in parts:
            data = (prefetched or {}).get(part.key)
            if data is None:
                stored = store.get(part.key)
                if stored is None:
                    raise PartMissing(part.key)
                data = stored.data
                downloaded += len(data)
            check_part(data, part, ref)
            path = Path(tmp) / "part.bundle"
            path.write_bytes(data)
            apply_bundle(cwd, path, part.key)
            path.unlink()
    return downloaded


def create_bundle(
    cwd: Path, ref: str, *, since: str | None = None, scratch: Path | None = None,
    verify: bool = True,
) -> bytes:
    """Return a verified bundle of ``ref`` (all history, or ``since..ref``) from ``cwd``.

    Args:
        cwd: the repository.
        ref: the ref to bundle, ``refs/heads/user/<id>``.
        since: a commit the bundle may require (an increment); ``None`` for a full bundle.
        scratch: where the bundle file is written before it is read back (default: system temp).
        verify: run ``git bundle verify`` (skipped by callers that check the header themselves
            and apply the bundle to no repository but their own).

    Raises:
        GitError: git failed (an empty range included). CorruptBundle: verification failed.
    """
    with tempfile.TemporaryDirectory(prefix="memrepo-bundle-", dir=scratch) as tmp:
        out = Path(tmp) / "out.bundle"
        revs = f"{since}..{ref}" if since else ref
        git(["bundle", "create", "-q", str(out), revs], cwd, timeout=600)
        if verify:
            checked = git(["bundle", "verify", "-q", str(out)], cwd, check=False)
            if checked.returncode != 0:
                raise CorruptBundle(
                    f"bundle just written fails verification: "
                    f"{checked.stderr.decode('utf-8', 'replace').strip()[:300]}"
                )
        return out.read_bytes()


def is_ancestor(cwd: Path, old: str, new: str) -> bool:
    """Whether commit ``old`` is an ancestor of (or equal to) ``new`` (git-merge-base(1))."""
    return git(["merge-base", "--is-ancestor", old, new], cwd, check=False).returncode == 0


def make_git_dir(git_dir: Path, branch: str, tip: str | None, *, alternates: Path | None,
                 bare: bool = False) -> None:
    """Write a minimal repository at ``git_dir`` (gitrepository-layout(5)) without running git.

    Args:
        git_dir: the ``.git`` directory to create (must not exist).
        branch: ``HEAD`` points to ``refs/heads/<branch>``.
        tip: the commit of that branch, or ``None`` for an unborn branch.
        alternates: an ``objects`` directory whose objects this repository borrows
            (gitrepository-layout(5) ``objects/info/alternates``), or ``None``.
        bare: write ``core.bare = true``.
    """
    (git_dir / "objects" / "info").mkdir(parents=True)
    (git_dir / "objects" / "pack").mkdir()
    (git_dir / "refs" / "tags").mkdir(parents=True)
    (git_dir / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
    (git_dir / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n"
        f"\tbare = {'true' if bare else 'false'}\n\tlogallrefupdates = false\n"
    )
    if alternates is not None:
        (git_dir / "objects" / "info" / "alternates").write_text(f"{alternates}\n")
    ref_file = git_dir / "refs" / "heads" / branch
    ref_file.parent.mkdir(parents=True, exist_ok=True)
    if tip is not None:
        ref_file.write_text(f"{tip}\n")
