"""The deterministic engine's term matcher: word starts only, as the look-behind it replaced."""

from __future__ import annotations

import re

from hypothesis import assume, given, settings
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
def test_terms_holding_underscores_apostrophes_or_dashes(text):
    terms = [*TERMS, "a_exam", "re-exam", "sarah's", "xam", "am"]
    assert _term_finder(terms)(text) == reference(terms, text)


@settings(max_examples=500)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=30).map("".join))
def test_agrees_on_any_unicode_text_lower_casing_keeps(text):
    # lower() and re's case-insensitive matching differ only for characters that lower() makes
    # longer ("İ") or that fold to another letter ("ſ" ~ "s"); those are the documented exceptions
    assume(all(len(c.lower()) == 1 and c.lower() == c.casefold() for c in text))
    terms = [*TERMS, "a_exam", "re-exam", "xam"]
    assert _term_finder(terms)(text) == reference(terms, text)


def test_the_documented_exceptions():
    assert _term_finder(TERMS)("İexam") == ["exam"] and reference(TERMS, "İexam") == []
    assert _term_finder(TERMS)("ſarah") == [] and reference(TERMS, "ſarah") == ["ſarah"]
