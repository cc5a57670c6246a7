"""Small text tools shared by the deterministic writer and retriever: words, stems, keywords."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

_WORD = re.compile(r"[^\W_][\w'’-]*[^\W_]|[^\W_]", re.UNICODE)

STOPWORDS = frozenset(
    """
a about above after again against ago all almost also am an and any anything are aren't around as
at away back be because been before being below between both but by can can't cannot could
couldn't did didn't do does doesn't doing don't done down during each either else even ever every
few for from further get gets getting go goes going gone good got great had hadn't has hasn't have
haven't having he he'd he'll he's her here here's hers herself hey hi him himself his how how's i
i'd i'll i'm i've if in into is isn't it it's its itself just know let let's like lot lots made
make many may me might more most much must my myself need new no nor not nothing now of off oh ok
okay on once one only or other ought our ours ourselves out over own really right said same say
says see she she'd she'll she's should shouldn't so some something still such sure take tell than
thank thanks that that's the their theirs them themselves then there there's these they they'd
they'll they're they've thing things think this those though through time to too totally truly
under until up upon us very was wasn't way we we'd we'll we're we've well went were weren't what
what's when when's where where's which while who who's whom why why's will with won't would
wouldn't wow yeah yes yet you you'd you'll you're you've your yours yourself yourselves yep
awesome cool glad hope love nice sounds sound amazing always never pretty quite bit want wanted
feel feels felt also did does kind lately recently today yesterday tomorrow last next week weeks
month months year years day days shares image photo pic picture
""".split()
)


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """Split ``text`` into lines at ``\\n`` only, as git and grep number lines.

    ``str.splitlines`` also breaks at ``\\r``, ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``,
    ``\\u2028`` and ``\\u2029``, which a turn's text may hold: line numbers from ``grep -n`` or a
    diff would then point at other lines. Like ``splitlines``, no empty last line is returned
    for a text ending in ``\\n``; with ``keepends`` every line keeps its ``\\n``.
    """
    parts = text.split("\n")
    last = parts.pop()
    if keepends:
        return [f"{part}\n" for part in parts] + ([last] if last else [])
    return [*parts, last] if last else parts


def words(text: str) -> list[str]:
    """Return the words of ``text`` in order, lowercased, apostrophes normalised."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def stem(word: str) -> str:
    """Return a crude stem for matching word families by prefix (``adoption`` → ``adopt``).

    Only suffixes are cut, and never below 4 letters, so ``git grep -F`` on the stem still finds
    every inflection that shares it.
    """
    word = word.lower().rstrip("'s").replace("'", "")
    for suffix in (
        "ations",
        "ation",
        "ions",
        "ion",
        "ings",
        "ing",
        "ies",
        "ied",
        "ers",
        "er",
        "ed",
        "es",
        "s",
        "ly",
        "y",
        "e",
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> list[str]:
    """Return the words of ``text`` that carry meaning: no stopwords, 3+ letters or a digit."""
    return [
        w
        for w in words(text)
        if w not in STOPWORDS and (len(w) >= 3 or any(c.isdigit() for c in w))
    ]


def keywords(texts: Iterable[str], top: int = 8) -> list[str]:
    """Return up to ``top`` most frequent content words over ``texts`` (ties by first seen)."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(content_words(text))
    return [w for w, _ in counts.most_common(top)]
