"""Lines are what git and grep call lines (``\\n`` only), even when a turn holds other breaks."""

from __future__ import annotations

import subprocess
from datetime import datetime

import memrepo
from hypothesis import given
from hypothesis import strategies as st
from memrepo import transcript
from memrepo.text import split_lines

BREAKS = "\u2028\u2029\x0b\x0c\x1c\x1d\x1e\x85"
ODD = "list:\u2028one\u2029two\x0bthree\x0cfour\x85five"


@given(st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", *BREAKS])))
def test_split_lines_breaks_only_at_newlines(text):
    assert "".join(split_lines(text, keepends=True)) == text
    assert all("\n" not in line for line in split_lines(text))
    assert len(split_lines(text)) == text.count("\n") + (not text.endswith("\n") and text != "")
    if not any(c in text for c in BREAKS):
        assert split_lines(text) == text.splitlines()
        assert split_lines(text, keepends=True) == text.splitlines(keepends=True)


def test_line_numbers_agree_with_grep(tmp_path):
    text = f"first\n{ODD}\nthe bakery line\nlast\n"
    (tmp_path / "f.md").write_text(text, encoding="utf-8")
    out = subprocess.run(["grep", "-n", "bakery", "f.md"], cwd=tmp_path, capture_output=True,
                         text=True, check=True, env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    number = int(out.stdout.split(":")[0])
    assert split_lines(text)[number - 1] == "the bakery line"


def test_context_and_rebuild_of_a_session_holding_other_line_breaks(tmp_path):
    (tmp_path / "tmp").mkdir()
    memory = memrepo.open((tmp_path / "store").as_uri(), "ana", tmp_dir=tmp_path / "tmp")
    memory.process_and_commit_session(
        f"Ana: {ODD}\nBot: Noted.\nAna: My sister Sarah starts at the bakery on Monday.\n"
        "Bot: Nice!",
        "s1", datetime.fromisoformat("2024-05-01T09:30:00+00:00"))
    memory.process_and_commit_session(
        "Ana: I adopted a cat called Miso.\nBot: Lovely.", "s2",
        datetime.fromisoformat("2024-05-02T09:30:00+00:00"))
    context = memory.context([{"role": "user", "content": "Where does Sarah start Monday?"}], 400)
    assert "Sarah starts at the bakery" in context.text
    result = memory.rebuild()  # transcripts parse back to the same digests
    assert result.sessions == 2


def test_a_transcript_renders_and_parses_back_with_other_line_breaks():
    from memrepo.events import parse_session_ended

    event = parse_session_ended({
        "user_id": "ana", "session_id": "s1", "occurred_at": "2024-05-01T09:30:00+00:00",
        "turns": [{"speaker": "Ana", "role": "user", "content": ODD},
                  {"speaker": "Bot", "role": "assistant", "content": "ok"}]})
    back = transcript.parse(transcript.render(event), "ana")
    assert back.digest() == event.digest() and back.turns[0].content == ODD
