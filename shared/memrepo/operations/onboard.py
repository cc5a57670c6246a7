"""Onboarding: create a user's memory from a short profile before the first session.

``onboard(changer, user, text)`` commits ``profile.md`` (and an empty ``index.md``) with the
trailers ``Onboarded: <date>`` and ``Writer: onboarding``. It is idempotent: when the user already
has a ``profile.md`` or an onboarding commit, nothing is written (status ``exists``).

The text is plain lines or a template file; a template may carry front matter (``name: "Ana"``).
Each line becomes a profile entry ``- profile: <line>`` (lines already starting with ``- `` are
kept, headings are dropped), the shape the writers keep and condense with the user's own
statements, so the onboarding survives the first session. The front matter holds ``name``,
``user_id``, ``type: "profile"`` and ``sessions: 0``. A rebuild starts from the onboarding commit's
files (see :mod:`memrepo.operations.rebuild`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from memrepo import frontmatter, index
from memrepo.errors import InvalidRequest
from memrepo.gitcli import git_text
from memrepo.ids import validate_user_id
from memrepo.layout import INDEX, PROFILE
from memrepo.operations.apply import Outcome, RepoChanger
from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

ONBOARDED = "Onboarded"
MAX_PROFILE_BYTES = 8_000


@dataclass(frozen=True)
class OnboardResult:
    """The outcome of :func:`onboard`: ``onboarded`` (saved) or ``exists`` (nothing written)."""

    status: Literal["onboarded", "exists"]
    user_id: str
    commit: str | None
    generation: int
    entries: int


def onboarding_commit(ws: Workspace) -> tuple[str, str] | None:
    """Return ``(commit, date)`` of the newest commit with an ``Onboarded:`` trailer, if any."""
    if ws.head() is None:
        return None
    out = git_text(
        ["log", "--first-parent", f"--grep=^{ONBOARDED}: ",
         f"--format=%H%x1f%(trailers:key={ONBOARDED},valueonly)%x1e", ws.branch],
        ws.path,
    )
    for record in out.split("\x1e"):
        commit, _, value = record.strip("\n").partition("\x1f")
        if commit and value.strip():
            return commit, value.strip()
    return None


def render_profile(user_id: str, text: str, *, name: str | None = None) -> tuple[str, int]:
    """Return ``(profile.md text, number of entries)`` for a profile ``text`` or template.

    Raises:
        InvalidRequest: the text is empty or over :data:`MAX_PROFILE_BYTES` bytes.
    """
    validate_user_id(user_id)
    if len(text.encode("utf-8")) > MAX_PROFILE_BYTES:
        raise InvalidRequest(f"profile is over {MAX_PROFILE_BYTES} bytes; keep it short")
    meta, body = frontmatter.split(text.replace("\r\n", "\n"))
    entries = []
    for line in body.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        entries.append(line if line.startswith("- ") else f"- profile: {line}")
    if not entries:
        raise InvalidRequest("profile text is empty; give a few lines about the user")
    shown = name or str(meta.get("name") or "") or user_id
    head = {"name": shown, "user_id": user_id, "type": "profile", "sessions": 0}
    body = f"# {shown}\n\nThe user. What they said about themselves, oldest first.\n\n"
    return frontmatter.render(head, body + "\n".join(entries) + "\n"), len(entries)


def onboard(
    changer: RepoChanger,
    user_id: str,
    text: str,
    *,
    name: str | None = None,
    now: datetime | None = None,
) -> OnboardResult:
    """Create ``user_id``'s memory from a profile ``text`` unless it exists (idempotent).

    Args:
        changer: applies and saves the change with the generation precondition.
        user_id: the user.
        text: profile lines or a template file's text.
        name: the user's name (default: the template's ``name``, else the user id).
        now: the clock (UTC) for the ``Onboarded:`` date.

    Raises:
        InvalidRequest: an empty or oversized profile. InvalidEvent: a bad user id.
        ConflictRetriesExhausted, StoreUnavailable, GitError: transient failures.
    """
    profile, count = render_profile(user_id, text, name=name)
    when = (now or datetime.now(UTC)).date().isoformat()

    def change(ws: Workspace) -> Outcome[str | None]:
        found = onboarding_commit(ws)
        if ws.read(PROFILE) is not None or found is not None:
            return Outcome(found[0] if found else ws.head(), save=False)
        ws.write(PROFILE, profile)
        ws.write(INDEX, index.render({p: ws.read(p) or "" for p in ws.files("memories/")}))
        return Outcome(ws.commit(f"Onboard {user_id}", {ONBOARDED: when, "Writer": "onboarding"}))

    applied = changer.apply(user_id, change, what=f"onboarding of {user_id}")
    status: Literal["onboarded", "exists"] = "onboarded" if applied.saved else "exists"
    log.info("user %s", status, extra={"user_id": user_id, "commit": applied.value})
    entries = count if applied.saved else 0
    return OnboardResult(status, user_id, applied.value, applied.token, entries)
