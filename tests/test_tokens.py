"""Token counting: the word count is a lower bound of the cl100k_base count (resolver shortcut)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from memrepo import tokens

PIECES = ["Sarah", "'s", " ", "  ", "\n", "\r\n", "\t", "...", "—", "café", "123456", "a", "!!",
          "### ", "**Ana**", "(user):", "🙂", "你好", "\u00a0", "don't", "x" * 40, " \n ", "-"]


@settings(max_examples=300, deadline=None)  # the first example loads the tokenizer
@given(st.lists(st.sampled_from(PIECES), max_size=60).map("".join))
def test_words_never_exceed_tokens_of_composed_text(text):
    assert tokens.at_least(text) <= tokens.count(text)


@settings(max_examples=300, deadline=None)  # the first example loads the tokenizer
@given(st.text(max_size=300))
def test_words_never_exceed_tokens_of_any_text(text):
    assert tokens.at_least(text) <= tokens.count(text)


def test_the_bound_is_tight_for_plain_words():
    assert tokens.at_least("the cat sat on the mat") == tokens.count("the cat sat on the mat") == 6


def test_no_token_of_the_vocabulary_spans_two_words():
    # what at_least relies on: a token never holds characters of two str.split() words, so each
    # word of a text costs at least one token of its own
    encoder = tokens.encoding()
    spanning = []
    for rank in range(encoder.n_vocab):
        try:
            piece = encoder.decode_single_token_bytes(rank).decode("utf-8", "ignore")
        except KeyError:  # ranks without a token
            continue
        if len(piece.split()) > 1:
            spanning.append(piece)
    assert spanning == []
