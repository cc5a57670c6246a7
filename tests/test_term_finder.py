"""The deterministic engine's term matcher: word starts only, as the look-behind it replaced."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from memrepo.retrieval.deterministic import _term_finder

TERMS = ["exam", "exa", "podcast", "café", "sarah", "kid"]
PIECES = ["exam", "Exams", "EXAMPLE", "podcasts", "Café", "CAFÉ", "sarah's", "_sarah", "a_exam",
          "kid", "kidding", "re-exam", "x", "ö", "É", " ", "  ", "**", "'", "-", "_", "\t", "3exam"]


def reference(terms: list[str], text: str) -> list[str]:
    """The matcher before: a case-insensitive look-behind for "not after a letter or digit"."""
    alternatives = "|".join(map(re.escape, sorted(terms, key=len, reverse=True)))
    pattern = re.compile(r"(?<![^\W_])(" + alternatives + ")", re.IGNORECASE)
    return [found.lower() for found in pattern.findall(text)]


def test_counts_terms_where_they_start_a_word():
    find = _term_finder(TERMS)
    assert find("Exams, re-exam and a_exam but not 3exam; podcast_exam") == [
        "exam", "exam", "exam", "podcast", "exam"]
    assert find("**Sarah**: Café? CAFÉ! kidding") == ["sarah", "café", "café", "kid"]


@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_agrees_with_the_case_insensitive_look_behind(text):
    assert _term_finder(TERMS)(text) == reference(TERMS, text)


@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_a_term_holding_an_underscore_takes_the_look_behind(text):
    terms = [*TERMS, "a_exam"]
    assert _term_finder(terms)(text) == reference(terms, text)
