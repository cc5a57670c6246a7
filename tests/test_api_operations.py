"""Revert and rebuild through the Python API (``memrepo.open``), on the filesystem store."""

from __future__ import annotations

from datetime import datetime

import memrepo
import pytest
from memrepo.operations.rebuild import NothingToRebuild
from memrepo.operations.revert import SessionNotFound

SESSIONS = [
    ("s1", "2024-03-01T10:00:00+00:00", "Ana: My sister Sarah is getting knee surgery.\nBot: Ok."),
    ("s2", "2024-03-15T10:00:00+00:00", "Ana: I adopted a cat called Miso.\nBot: Lovely."),
    ("s3", "2024-04-02T10:00:00+00:00", "Ana: I train for the Berlin marathon.\nBot: Great."),
]


@pytest.fixture
def memory(tmp_path):
    (tmp_path / "tmp").mkdir()
    memory = memrepo.open((tmp_path / "store").as_uri(), "ana", tmp_dir=tmp_path / "tmp",
                          cache_max_bytes=0)
    for sid, when, text in SESSIONS:
        memory.process_and_commit_session(text, sid, datetime.fromisoformat(when))
    return memory


def ask(memory, text):
    return memory.context([{"role": "user", "content": text}], 1500).text


def test_revert_undoes_one_session_as_a_new_commit(memory):
    assert "Miso" in ask(memory, "What is my cat called? Miso?")
    result = memory.revert("s2")
    assert (result.status, result.session_id) == ("reverted", "s2")
    assert any("sessions/" in line for line in result.changed)
    assert "Miso" not in ask(memory, "What is my cat called? Miso?")
    assert "marathon" in ask(memory, "How is the Berlin marathon training?")
    again = memory.revert("s2")
    assert (again.status, again.commit) == ("already-reverted", result.commit)
    with pytest.raises(SessionNotFound):
        memory.revert("s9")


def test_rebuild_replays_every_transcript_onto_a_new_history(memory):
    before = ask(memory, "How is Sarah after the knee surgery?")
    steps = []
    result = memory.rebuild(checkpoint_every=1, on_progress=steps.append)
    assert result.sessions == 3 and result.resumed_from == 0
    assert result.commit != result.replaced
    assert steps and steps[-1].done == steps[-1].total == 3
    assert "knee surgery" in before and "knee surgery" in ask(
        memory, "How is Sarah after the knee surgery?")


def test_rebuild_of_a_user_without_memory_is_refused(tmp_path):
    (tmp_path / "tmp").mkdir()
    nobody = memrepo.open((tmp_path / "store").as_uri(), "nobody", tmp_dir=tmp_path / "tmp")
    with pytest.raises(NothingToRebuild):
        nobody.rebuild()
