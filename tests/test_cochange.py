"""Co-change from a per-tip commit log: the same files as ``git log --full-diff``, kept current."""

from __future__ import annotations

import random
import subprocess
import threading
from pathlib import Path

from memrepo.gitcli import git, git_text
from memrepo.retrieval.cochange import CommitLogCache

PEOPLE = [f"memories/people/p{i}.md" for i in range(6)]


def commit(repo: Path, n: int, rng: random.Random) -> str:
    """One session-like commit: a transcript, the timeline, and one or two people's files."""
    touched = [f"sessions/s{n:03}.md", f"timeline/2024-{n % 12 + 1:02}.md",
               *rng.sample(PEOPLE, rng.choice((1, 2)))]
    for path in touched:
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a") as f:
            f.write(f"session {n}\n")
    git(["add", "-A"], repo)
    git(["commit", "-q", "-m", f"session {n}"], repo)
    return git_text(["rev-parse", "HEAD"], repo).strip()


def git_changed_with(repo: Path, head: str, paths: list[str], window: int) -> set[str]:
    out = git_text(["log", "--format=", "--name-only", "--full-diff", f"-{window}", head,
                    "--", *paths], repo)
    return {p for p in out.splitlines() if p}


def new_repo(tmp_path: Path, commits: int, seed: int = 3) -> tuple[Path, list[str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(["init", "-q"], repo)
    rng = random.Random(seed)
    return repo, [commit(repo, n, rng) for n in range(commits)]


def test_changed_with_is_what_git_log_full_diff_lists(tmp_path):
    repo, tips = new_repo(tmp_path, 60)
    log = CommitLogCache().log(repo, tips[-1])
    for paths in ([PEOPLE[0]], PEOPLE[1:3], [PEOPLE[5], "timeline/2024-03.md"], ["nope.md"]):
        for window in (1, 5, 200):
            assert log.changed_with(paths, window) == git_changed_with(
                repo, tips[-1], paths, window), (paths, window)


def test_a_tip_moving_forward_reads_only_the_new_commits(tmp_path):
    repo, tips = new_repo(tmp_path, 30)
    cache = CommitLogCache(max_logs=16)
    cache.log(repo, tips[-1])
    rng = random.Random(9)
    for n in range(30, 40):
        tip = commit(repo, n, rng)
        log = cache.log(repo, tip)
        assert len(log.commits) == n + 1
        for person in PEOPLE:
            assert log.changed_with([person], 7) == git_changed_with(repo, tip, [person], 7)
    assert cache.stats == {"full": 1, "extended": 10, "hits": 0}
    assert cache.log(repo, tips[-1]).head == tips[-1]  # the older tip is still kept, unchanged
    assert len(cache.log(repo, tips[-1]).commits) == 30
    assert cache.stats["hits"] == 2


def test_a_tip_that_is_not_a_descendant_is_read_whole(tmp_path):
    repo, tips = new_repo(tmp_path, 20)
    cache = CommitLogCache()
    cache.log(repo, tips[-1])
    git(["reset", "-q", "--hard", tips[9]], repo)  # history rewritten from the 10th commit
    rewritten = [commit(repo, n, random.Random(n)) for n in range(100, 103)]
    log = cache.log(repo, rewritten[-1])
    assert cache.stats["full"] == 2 and cache.stats["extended"] == 0
    assert len(log.commits) == 13
    assert log.changed_with(PEOPLE, 200) == git_changed_with(repo, rewritten[-1], PEOPLE, 200)


def test_logs_are_bounded_least_recently_used_first(tmp_path):
    repo, tips = new_repo(tmp_path, 6)
    cache = CommitLogCache(max_logs=2)
    for tip in tips[:4]:
        cache.log(repo, tip)
    assert list(cache._logs) == tips[2:4]
    cache.log(repo, tips[2])
    cache.log(repo, tips[4])
    assert list(cache._logs) == [tips[2], tips[4]]


def test_concurrent_requests_at_different_tips_agree_with_git(tmp_path):
    repo, tips = new_repo(tmp_path, 40)
    expected = {tip: git_changed_with(repo, tip, PEOPLE[:2], 10) for tip in tips[-8:]}
    cache = CommitLogCache(max_logs=3)
    errors: list[BaseException] = []

    def ask(tip: str) -> None:
        try:
            for _ in range(5):
                assert cache.log(repo, tip).changed_with(PEOPLE[:2], 10) == expected[tip]
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(tip,)) for tip in [*tips[-8:], *tips[-8:]]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_rebuild_merge_counts_only_the_rebuilt_lineage_cold_or_warm(tmp_path):
    # the shape of memrepo's rebuild: a new root lineage, merged over the old tip with the new
    # lineage as first parent and its tree (docs/operations.md "Rebuild")
    repo, old = new_repo(tmp_path, 12)
    git(["checkout", "-q", "--orphan", "rebuilt"], repo)
    git(["rm", "-q", "-r", "--cached", "."], repo)
    for path in repo.iterdir():
        if path.name != ".git":
            subprocess.run(["rm", "-rf", str(path)], check=True)
    rebuilt = [commit(repo, n, random.Random(n)) for n in range(200, 206)]
    tree = git_text(["rev-parse", f"{rebuilt[-1]}^{{tree}}"], repo).strip()
    merge = git_text(["commit-tree", tree, "-p", rebuilt[-1], "-p", old[-1], "-m", "rebuild"],
                     repo).strip()
    warm = CommitLogCache()
    warm.log(repo, old[-1])
    warm_log = warm.log(repo, merge)
    cold_log = CommitLogCache().log(repo, merge)
    assert warm.stats["extended"] == 0  # the old tip is not on the merge's first-parent chain
    for paths in ([PEOPLE[0]], PEOPLE[2:4], PEOPLE):
        expected = git_changed_with(repo, merge, paths, 5)
        assert warm_log.changed_with(paths, 5) == cold_log.changed_with(paths, 5) == expected
    assert len(cold_log.commits) == 7  # six rebuilt sessions and the merge (which shows no files)


def test_a_tip_of_another_repository_at_the_same_path_is_read_whole(tmp_path):
    repo, tips = new_repo(tmp_path, 5)
    cache = CommitLogCache()
    cache.log(repo, tips[-1])
    subprocess.run(["rm", "-rf", str(repo)], check=True)
    repo, other = new_repo(tmp_path, 4, seed=11)  # the same directory, another history
    assert cache.log(repo, other[-1]).changed_with(PEOPLE, 200) == git_changed_with(
        repo, other[-1], PEOPLE, 200)
    assert cache.stats == {"full": 2, "extended": 0, "hits": 0}
