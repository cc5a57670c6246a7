"""The deterministic engine's line search: GNU grep over a work tree, as ``git grep`` would find."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memrepo.errors import SearchFailed
from memrepo.gitcli import git, git_text
from memrepo.retrieval.linesearch import LineHit, grep_lines


def make_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return root


FILES: dict[str, str | bytes] = {
    "index.md": "| Sarah | sister | person | memories/people/sarah.md |\n",
    "profile.md": "# Ana\n\nLives in Lisbon. Sister: Sarah.\n",
    "memories/people/sarah.md": "---\nname: Sarah\n---\nKnee SURGERY in March.\n",
    "memories/people/tom.md": "---\nname: Tom\n---\nCoach; a.b testing fan\n",
    "sessions/2024/03/s1.md": (
        "# Session s1\n\n- **Ana** (user): My sister Sarah is getting surgery.\n"
        "- **Bot** (assistant): I hope the surgery goes well.\n"
    ),
    "sessions/2024/04/s3.md": "- **Ana** (user): Sarah’s knee is better; café visits again.\n",
    "timeline/2024-03.md": "- 2024-03-01: Sarah surgery planned\n",
    "notes/-dash.md": "surgery notes in a file whose name starts with a dash\n",
    "blob.bin": b"surgery\x00\x01\x02 binary content",
}


def test_finds_every_line_holding_a_term_case_insensitively_sorted(tmp_path):
    root = make_tree(tmp_path, FILES)
    hits = grep_lines(root, ["surgery", "knee"], exclude={"index.md"})
    assert [(h.path, h.line) for h in hits] == [
        ("memories/people/sarah.md", 4),
        ("notes/-dash.md", 1),
        ("sessions/2024/03/s1.md", 3),
        ("sessions/2024/03/s1.md", 4),
        ("sessions/2024/04/s3.md", 1),
        ("timeline/2024-03.md", 1),
    ]
    assert hits[0] == LineHit("memories/people/sarah.md", 4, "Knee SURGERY in March.")
    assert all("index.md" not in h.path and h.path != "blob.bin" for h in hits)


def test_terms_are_fixed_strings_not_patterns_or_options(tmp_path):
    root = make_tree(tmp_path, FILES)
    assert [h.path for h in grep_lines(root, ["a.b"])] == ["memories/people/tom.md"]
    assert grep_lines(root, ["-v"]) == []  # an option-like term is a pattern (-e), not an option
    assert grep_lines(root, ["s.r.e"]) == []
    assert grep_lines(root, []) == [] and grep_lines(root, [""]) == []
    assert [h.line for h in grep_lines(root, ["CAFÉ"])] == [1]  # UTF-8 case folding


def test_git_directory_and_symbolic_links_are_never_searched(tmp_path):
    root = make_tree(tmp_path / "tree", FILES)
    outside = make_tree(tmp_path / "outside", {"secret.md": "surgery secret\n"})
    git(["init", "-q"], root)
    (root / ".git" / "surgery.md").write_text("surgery in .git\n")
    os.symlink(outside, root / "linked-dir")
    os.symlink(outside / "secret.md", root / "linked.md")
    os.symlink(outside, root / "memories" / "inner-link")
    hits = grep_lines(root, ["surgery"], exclude={"index.md"})
    assert hits and all(not h.path.startswith((".git", "linked")) for h in hits)
    assert all("inner-link" not in h.path and "secret" not in h.text for h in hits)


def test_same_lines_as_git_grep_on_a_repository(tmp_path):
    root = make_tree(tmp_path, {k: v for k, v in FILES.items() if isinstance(v, str)})
    git(["init", "-q"], root)
    git(["add", "-A"], root)
    git(["commit", "-q", "-m", "files"], root)
    for terms in (["surgery"], ["sarah", "knee", "lisbon"], ["ana", "coach", "café"]):
        args = ["grep", "-n", "-I", "-i", "-F", "--no-color"]
        for term in terms:
            args += ["-e", term]
        out = git_text([*args, "--", ".", ":!index.md"], root, check=False)
        expected = []
        for row in out.splitlines():
            path, _, rest = row.partition(":")
            number, _, text = rest.partition(":")
            expected.append(LineHit(path, int(number), text))
        assert grep_lines(root, terms, exclude={"index.md"}) == expected


def test_a_failing_grep_raises_search_failed(tmp_path, monkeypatch):
    root = make_tree(tmp_path / "tree", FILES)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "grep"
    fake.write_text("#!/bin/sh\necho 'grep: sessions: Input/output error' >&2\nexit 2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(SearchFailed, match=r"grep failed \(2\): grep: sessions: Input/output"):
        grep_lines(root, ["surgery"])
    fake.write_text("#!/bin/sh\nsleep 5\n")
    with pytest.raises(SearchFailed, match="timed out"):
        grep_lines(root, ["surgery"], timeout_s=0.2)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SearchFailed, match="could not start"):
        grep_lines(root, ["surgery"])


def test_no_match_is_an_empty_list_not_an_error(tmp_path):
    root = make_tree(tmp_path, FILES)
    assert grep_lines(root, ["zeppelin"]) == []
    assert grep_lines(tmp_path / "memories" / "people", ["sarah"]) == [
        LineHit("sarah.md", 2, "name: Sarah")]  # a tree with files at its top level
