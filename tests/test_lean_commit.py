"""Lean workspaces stage exactly what was written: the same tree as a full checkout's commit."""

from __future__ import annotations

import os

import pytest
from fakes import InMemoryStore
from helpers import event
from memrepo.errors import GitError
from memrepo.events import parse_session_ended
from memrepo.gitcli import git_text
from memrepo.repocache import RepoCache
from memrepo.repos import UserRepos
from memrepo.workspace import PathOutsideRepo
from memrepo.writer import DeterministicWriter, SessionWriter
from memrepo.writer.service import commit_session


def session(n: int):
    return parse_session_ended(event(
        session_id=f"s{n}", occurred_at=f"2024-03-{n:02}T10:00:00+00:00",
        turns=[{"speaker": "Ana", "role": "user", "content": f"Sarah and Tom came by, day {n}."},
               {"speaker": "Bot", "role": "assistant", "content": "Nice."}]))


@pytest.fixture
def repos(tmp_path):
    cache = RepoCache(tmp_path / "cache", 1 << 30)
    repos = UserRepos(InMemoryStore(), tmp_root=tmp_path, cache=cache)
    writer = SessionWriter(repos, DeterministicWriter())
    for n in range(1, 4):
        writer.write(session(n))
    return repos


def test_a_lean_commit_has_the_tree_a_full_commit_has(repos):
    lean, _ = repos.checkout("ana", lean=True)
    full, _ = repos.checkout("ana")
    with lean, full:
        assert lean.lazy_prefixes and not full.lazy_prefixes
        trees = []
        for ws in (lean, full):
            commit = commit_session(ws, DeterministicWriter(), session(4))[0]
            trees.append(git_text(["rev-parse", f"{commit}^{{tree}}"], ws.path).strip())
        changed = git_text(["diff", "--name-only", "HEAD~1", "HEAD"], lean.path).split()
    assert trees[0] == trees[1]
    assert any(p.startswith("timeline/") for p in changed)  # a skip-worktree entry, updated
    assert any(p.startswith("sessions/") for p in changed)  # a new lazy file


def test_a_written_path_turned_symbolic_link_is_not_staged(repos, tmp_path):
    ws, _ = repos.checkout("ana", lean=True)
    with ws:
        ws.write("memories/people/sarah.md", "# Sarah\n")
        link = ws.resolve("memories/people/sarah.md")
        os.remove(link)
        os.symlink(ws.resolve("profile.md"), link)  # inside the repository: not staged blind
        with pytest.raises(GitError, match="symbolic link"):
            ws.commit("edit", {"Session-Id": "x"})
        os.remove(link)
        (tmp_path / "elsewhere.md").write_text("not memory\n")
        os.symlink(tmp_path / "elsewhere.md", link)  # outside: refused by resolve() already
        with pytest.raises(PathOutsideRepo):
            ws.commit("edit", {"Session-Id": "x"})
