"""The git mirror: pushes after saves, keeps the token out of files, argv and logs, never fails
a write, catches up after a miss, fast-forwards after a rebuild."""

from __future__ import annotations

import logging
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from git_http_server import GitHttpServer
from helpers import event
from memrepo.events import parse_session_ended
from memrepo.logs import CloudLoggingFormatter
from memrepo.operations.apply import RepoChanger
from memrepo.operations.mirror import Mirror, MirrorConfigError, MirrorError
from memrepo.operations.rebuild import Rebuilder
from memrepo.repos import UserRepos
from memrepo.store import FilesystemStore
from memrepo.writer import DeterministicWriter, SessionWriter

TOKEN = "ghp_T0kenThatMustNeverLeak9f3a"


def remote_ref(repo: Path, user: str = "ana") -> str:
    proc = subprocess.run(["git", "--git-dir", str(repo), "rev-parse", f"refs/heads/user/{user}"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def writer(store_dir: Path, mirror: Mirror) -> SessionWriter:
    repos = UserRepos(FilesystemStore(store_dir), tmp_root=store_dir.parent)
    return SessionWriter(repos, DeterministicWriter(), sleep=lambda s: None,
                         after_save=[mirror.hook])


def write(w: SessionWriter, n: int, user: str = "ana"):
    return w.write(parse_session_ended(event(
        user_id=user, session_id=f"s{n}", occurred_at=f"2024-05-0{n}T09:00:00+00:00")))


def tip(w: SessionWriter, user: str = "ana") -> str:
    ws, _ = w.repos.checkout(user)
    with ws:
        return ws.head() or ""


@pytest.fixture
def git_argv_log(tmp_path, monkeypatch) -> Path:
    """Put a ``git`` wrapper first on PATH recording every argv (the token must not be in one)."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout
    real = real.strip()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "argv.log"
    wrapper = bindir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{record}"\nexec {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return record


def test_pushes_each_write_to_a_local_bare_repository(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    w = writer(tmp_path / "store", Mirror(str(remote)))
    write(w, 1)
    assert remote_ref(remote) == tip(w)
    write(w, 2)
    assert remote_ref(remote) == tip(w)
    refs = subprocess.run(["git", "--git-dir", str(remote), "for-each-ref", "--format=%(refname)"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert refs == ["refs/heads/user/ana"]


def test_token_only_travels_as_a_header_never_in_files_argv_or_logs(tmp_path, caplog, git_argv_log):
    caplog.set_level(logging.DEBUG)
    with GitHttpServer(tmp_path / "remotes", TOKEN) as server:
        (tmp_path / "remotes").mkdir(exist_ok=True)
        repo = server.create_repo("memories-ana.git")
        mirror = Mirror(f"{server.url}/memories-{{user_id}}.git", token=TOKEN)
        w = writer(tmp_path / "store", mirror)
        write(w, 1)
        write(w, 2)
        assert remote_ref(repo) == tip(w)
        assert any(r.get("Authorization") == server.expected for r in server.requests)
        assert server.refused == 0

        # a wrong token: refused by the remote, logged at WARNING (redacted), the write stands
        wrong = Mirror(f"{server.url}/memories-{{user_id}}.git", token=TOKEN[::-1])
        w2 = writer(tmp_path / "store", wrong)
        assert write(w2, 3).status == "committed"
        assert remote_ref(repo) != tip(w2)
        assert server.refused >= 1

    secrets = [TOKEN, TOKEN[::-1], server.expected.split()[1]]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("mirror push failed" in r.getMessage() for r in warnings)
    formatter = CloudLoggingFormatter()
    for record in caplog.records:
        line = formatter.format(record)
        assert not any(s in line for s in secrets), line
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(s.encode() in data for s in secrets), path
    assert git_argv_log.read_text().count("push") >= 3  # the wrapper saw the pushes
    assert not any(k.startswith("GIT_CONFIG") for k in os.environ)


def test_an_unreachable_remote_never_fails_or_changes_a_write(tmp_path, caplog):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    w = writer(tmp_path / "store", Mirror(f"http://127.0.0.1:{port}/m.git", token=TOKEN,
                                           timeout_s=10))
    result = write(w, 1)
    assert result.status == "committed" and result.attempts == 1
    assert tip(w) == result.commit
    assert any(r.levelno == logging.WARNING and "mirror" in r.getMessage() for r in caplog.records)


def test_a_mirror_that_is_behind_catches_up_on_the_next_write(tmp_path):
    remote = tmp_path / "late.git"
    w = writer(tmp_path / "store", Mirror(str(remote)))
    write(w, 1)  # the remote does not exist yet: the push fails, the write stands
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    write(w, 2)
    assert remote_ref(remote) == tip(w)
    count = subprocess.run(["git", "--git-dir", str(remote), "rev-list", "--count", "user/ana"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert count == "2"


def test_a_rebuild_is_pushed_as_a_fast_forward(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    # receive.denyNonFastForwards: the remote would refuse any history rewrite
    subprocess.run(["git", "--git-dir", str(remote), "config", "receive.denyNonFastForwards",
                    "true"], check=True)
    mirror = Mirror(str(remote))
    w = writer(tmp_path / "store", mirror)
    write(w, 1)
    write(w, 2)
    changer = RepoChanger(w.repos, sleep=lambda s: None, after_save=[mirror.hook])
    result = Rebuilder(changer, DeterministicWriter(), w.repos.store).rebuild("ana")
    assert remote_ref(remote) == result.commit


def test_background_mode_returns_before_the_push_and_wait_joins_it(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    mirror = Mirror(str(remote), background=True)
    w = writer(tmp_path / "store", mirror)
    write(w, 1)
    mirror.wait(30)
    assert remote_ref(remote) == tip(w)
    assert not list(tmp_path.glob("memrepo-mirror-*"))


def test_push_reports_up_to_date_and_refuses_a_foreign_history_without_force(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    w = writer(tmp_path / "store", Mirror(str(remote)))
    write(w, 1)
    mirror = Mirror(str(remote))
    ws, _ = w.repos.checkout("ana")
    with ws:
        assert mirror.push(ws).status == "up-to-date"
    other = writer(tmp_path / "store2", Mirror(str(tmp_path / "nowhere.git")))
    write(other, 2)  # another history (s1 again could give the very same commit id)
    ws, _ = other.repos.checkout("ana")
    with ws:
        with pytest.raises(MirrorError, match="rejected"):
            mirror.push(ws)
        assert mirror.push(ws, force=True).status == "pushed"


@pytest.mark.parametrize("url", [
    "https://user:pw@github.com/org/m.git",
    "http://github.com/org/m.git",
    "ssh://git@github.com/org/m.git",
    "https://github.com/org/{user}.git",
])
def test_unaccepted_urls_are_refused(url):
    with pytest.raises(MirrorConfigError):
        Mirror(url)


class FakeResponse:
    def __init__(self, status: int, payload: dict) -> None:
        self.status_code, self._payload = status, payload

    def json(self) -> dict:
        return self._payload


class FakeSession:
    """The AuthorizedSession surface access_secret uses: ``get(url, timeout=...)``."""

    def __init__(self, response: FakeResponse) -> None:
        self.response, self.urls = response, []

    def get(self, url: str, timeout: float) -> FakeResponse:
        self.urls.append(url)
        return self.response


def test_secret_manager_token_is_read_once_and_never_echoed():
    import base64 as b64

    from memrepo.adapters.secrets import SecretConfigError, access_secret
    from memrepo.errors import StoreUnavailable

    name = "projects/p/secrets/mirror-token/versions/latest"
    ok = FakeSession(FakeResponse(200, {"payload": {"data": b64.b64encode(
        (TOKEN + "\n").encode()).decode()}}))
    assert access_secret(name, session=ok) == TOKEN
    assert ok.urls == [f"https://secretmanager.googleapis.com/v1/{name}:access"]
    with pytest.raises(StoreUnavailable, match="403") as refused:
        access_secret(name, session=FakeSession(FakeResponse(403, {"error": TOKEN})))
    assert TOKEN not in str(refused.value)
    with pytest.raises(SecretConfigError):
        access_secret("projects/p/secrets/s")


def test_bootstrap_wires_the_mirror_from_settings(tmp_path):
    from memrepo import bootstrap
    from memrepo.settings import Settings

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    settings = Settings.from_env({"MEMREPO_STORE": (tmp_path / "store").as_uri(),
                                  "MEMREPO_ENGINE": "deterministic",
                                  "MEMREPO_MIRROR_URL": str(remote),
                                  "MEMREPO_MIRROR_TOKEN": TOKEN})
    assert bootstrap.mirror(settings) is not None
    assert len(bootstrap.after_save(settings)) == 1
    result = bootstrap.writer(settings).write(parse_session_ended(event(session_id="b1")))
    assert remote_ref(remote) == result.commit
    assert bootstrap.mirror(Settings.from_env({"MEMREPO_STORE": settings.store_url})) is None
    with pytest.raises(MirrorConfigError):
        bootstrap.mirror(Settings.from_env({"MEMREPO_MIRROR_URL": "ftp://x/{user_id}"}))
