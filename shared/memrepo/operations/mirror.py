"""Mirror: push a user's branch to a git remote (a private GitHub repository, say), best effort.

Configuration (see :mod:`memrepo.settings`): ``MEMREPO_MIRROR_URL`` is a remote URL in which
``{user_id}`` is replaced by the user id — ``https://github.com/org/memories-{user_id}.git`` (one
repository per user, created beforehand) or ``https://github.com/org/memories.git`` (one repository,
a branch per user). The branch ``user/<id>`` is pushed to ``refs/heads/user/<id>`` in both cases.
Accepted: ``https://``; ``http://`` to a loopback host only; ``file://`` and absolute paths (a
local bare repository, for backups and tests). A URL with credentials in it is refused.

The token (``MEMREPO_MIRROR_TOKEN``, or read from Secret Manager when
``MEMREPO_MIRROR_TOKEN_SECRET`` names a secret version) is never written into a repository's
config, a URL, a command line or a log line: it reaches git only as an HTTP header set through
the environment of the one ``git push`` process (``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_0``/
``GIT_CONFIG_VALUE_0`` = ``http.extraHeader: Authorization: Basic base64(user:token)``, see
git-config(1) "ENVIRONMENT"), and every message from git is redacted before it is logged or
raised.

Semantics: the whole branch is pushed after each successful save (an after-save hook of
:class:`~memrepo.operations.apply.RepoChanger`), so a mirror that missed pushes catches up on the
next write, or with ``memrepo mirror USER``. memrepo's history only moves forward (a revert adds a
commit; a rebuild merges over the old tip), so pushes are fast-forwards; a rejected non-fast-
forward means someone else wrote to the mirror, which is logged and left alone unless
``force=True`` (``memrepo mirror USER --force``). Failures never fail or block a write: the hook
logs them at WARNING. The push runs *after* the save, bounded by ``timeout_s``; in ``background``
mode it runs on a worker thread from a private copy, so the write returns at once (use it in
long-lived processes; a Cloud Function may be throttled after it answers, so it pushes inline).
"""

from __future__ import annotations

import base64
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from memrepo.errors import PermanentError, TransientError
from memrepo.gitcli import git
from memrepo.ids import validate_user_id
from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class MirrorConfigError(PermanentError):
    """Raised when the mirror URL is not an accepted remote (scheme, credentials, placeholder)."""


class MirrorError(TransientError):
    """Raised when a push fails (remote down, auth refused, non-fast-forward); message redacted."""


@dataclass(frozen=True)
class MirrorResult:
    """The outcome of one push.

    Attributes:
        user_id: the user.
        remote: the remote URL (no credentials in it).
        ref: the ref pushed, ``refs/heads/user/<id>``.
        status: ``pushed`` (the remote moved) or ``up-to-date``.
        commit: the commit pushed.
    """

    user_id: str
    remote: str
    ref: str
    status: Literal["pushed", "up-to-date"]
    commit: str


def redact(text: str, secrets: list[str]) -> str:
    """Return ``text`` with every secret (and any ``Authorization:`` header value) replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    lines = [
        line.split(":", 1)[0] + ": [REDACTED]" if "authorization:" in line.lower() else line
        for line in text.splitlines()
    ]
    return "\n".join(lines)


class Mirror:
    """Push users' branches to the remote named by a URL template (see the module docstring)."""

    def __init__(
        self,
        url_template: str,
        *,
        token: str | Callable[[], str | None] | None = None,
        username: str = "x-access-token",
        timeout_s: float = 60.0,
        background: bool = False,
    ) -> None:
        """Args:
        url_template: remote URL with an optional ``{user_id}`` placeholder.
        token: the token, or a function returning it (called once, on the first push; e.g. a
            Secret Manager read); ``None`` pushes without an Authorization header.
        username: the user name paired with the token in Basic auth (GitHub accepts
            ``x-access-token`` for both personal and app tokens).
        timeout_s: wall-clock limit of one push in seconds.
        background: push on a worker thread from a private copy (see the module docstring).

        Raises:
            MirrorConfigError: the template is not an accepted remote.
        """
        self.url_template = url_template
        self.username = username
        self.timeout_s = timeout_s
        self.background = background
        self._token_source = token
        self._token: str | None = None
        self._token_loaded = False
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self.scheme = self._check(url_template)

    @staticmethod
    def _check(template: str) -> str:
        probe = template.replace("{user_id}", "u")
        if probe.startswith("/"):
            return "file"
        parts = urlsplit(probe)
        if parts.scheme not in ("https", "http", "file"):
            raise MirrorConfigError(
                f"mirror URL must be https://, file:// or an absolute path, got {parts.scheme!r}"
            )
        if parts.username or parts.password:
            raise MirrorConfigError(
                "mirror URL must not hold credentials; set MEMREPO_MIRROR_TOKEN instead"
            )
        if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
            raise MirrorConfigError("plain http:// is accepted for a loopback host only")
        if "{" in probe or "}" in probe:
            raise MirrorConfigError("the only placeholder accepted in the mirror URL is {user_id}")
        return parts.scheme

    def url_for(self, user_id: str) -> str:
        """Return the remote URL of ``user_id`` (id validated)."""
        return self.url_template.replace("{user_id}", validate_user_id(user_id))

    def _secret(self) -> str | None:
        with self._lock:
            if not self._token_loaded:
                source = self._token_source
                try:
                    self._token = source() if callable(source) else source
                except Exception as exc:  # noqa: BLE001 - reported without its text (a secret?)
                    raise MirrorError(f"mirror token unavailable: {type(exc).__name__}") from None
                self._token_loaded = True
            return self._token

    def _env(self) -> tuple[dict[str, str], list[str]]:
        token = self._secret()
        if not token or self.scheme not in ("http", "https"):
            return {}, [token] if token else []
        basic = base64.b64encode(f"{self.username}:{token}".encode()).decode()
        env = {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
        return env, [token, basic]

    # -- pushing -----------------------------------------------------------------------------

    def push(self, ws: Workspace, *, force: bool = False) -> MirrorResult:
        """Push the workspace's branch to the user's remote (blocking, bounded by ``timeout_s``).

        Args:
            ws: a workspace holding the user's branch (a checkout, or a private copy).
            force: overwrite the remote branch even when the push is not a fast-forward.

        Raises:
            MirrorError: git failed (message redacted). MirrorConfigError: bad template.
        """
        return self._push_dir(ws.path, ws.user_id, force=force)

    def _push_dir(self, path: Path, user_id: str, *, force: bool = False) -> MirrorResult:
        ref = f"refs/heads/user/{validate_user_id(user_id)}"
        remote = self.url_for(user_id)
        env, secrets = self._env()
        args = [
            "-c", f"protocol.{self.scheme}.allow=always",
            "-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=30",
            "push", "--porcelain", "--no-verify", remote, f"{'+' if force else ''}{ref}:{ref}",
        ]
        try:
            proc = git(args, path, env=env, check=False, timeout=self.timeout_s)
        except TransientError as exc:  # the timeout
            raise MirrorError(redact(f"push of {user_id} to {remote}: {exc}", secrets)) from None
        out = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
        if proc.returncode != 0:
            reason = " ".join(out.split())[:400]
            raise MirrorError(redact(f"push of {user_id} to {remote} failed: {reason}", secrets))
        commit = git(["rev-parse", ref], path).stdout.decode().strip()
        fresh = "[up to date]" in out
        status: Literal["pushed", "up-to-date"] = "up-to-date" if fresh else "pushed"
        return MirrorResult(user_id, remote, ref, status, commit)

    def hook(self, ws: Workspace) -> None:
        """After-save hook: push ``ws``'s branch; log a failure at WARNING and never raise."""
        if not self.background:
            self._push_logged(ws.path, ws.user_id)
            return
        copy = Path(tempfile.mkdtemp(prefix="memrepo-mirror-"))
        try:
            git(["clone", "-q", "--bare", "--no-tags", str(ws.path), str(copy / "repo.git")], copy)
        except BaseException:
            shutil.rmtree(copy, ignore_errors=True)
            raise
        user_id = ws.user_id

        def job() -> None:
            try:
                self._push_logged(copy / "repo.git", user_id)
            finally:
                shutil.rmtree(copy, ignore_errors=True)

        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mirror")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._executor.submit(job))

    def _push_logged(self, path: Path, user_id: str) -> MirrorResult | None:
        try:
            result = self._push_dir(path, user_id)
        except (MirrorError, MirrorConfigError) as exc:
            log.warning("mirror push failed; the next write retries: %s", exc,
                        extra={"user_id": user_id, "error": type(exc).__name__})
            return None
        log.info("mirror %s", result.status,
                 extra={"user_id": user_id, "commit": result.commit, "ref": result.ref})
        return result

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for background pushes queued so far (a CLI or test calls this before exiting)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result(timeout=timeout_s)
