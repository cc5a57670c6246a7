"""``index.md``: the manifest of entities, rebuilt in code from each entity file's front matter.

Neither engine writes the index by hand: after a session's files are prepared, the index is
regenerated from the ``name``, ``aliases``, ``type``, ``cues``, ``last_session`` and ``last_date``
front-matter fields of every file under the ontology's folders, so it always matches the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memrepo import frontmatter


@dataclass(frozen=True)
class IndexEntry:
    """One row of the index."""

    name: str
    aliases: tuple[str, ...]
    type: str
    path: str
    cues: tuple[str, ...]
    last_session: str
    last_date: str


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ").strip()


def entries(files: Mapping[str, str]) -> list[IndexEntry]:
    """Return the index entries of ``files`` (path → text), sorted by type then name."""
    rows = []
    for path, text in files.items():
        meta, _ = frontmatter.split(text)
        if not meta.get("name"):
            continue
        rows.append(
            IndexEntry(
                name=str(meta["name"]),
                aliases=tuple(str(a) for a in meta.get("aliases") or ()),
                type=str(meta.get("type") or "entity"),
                path=path,
                cues=tuple(str(c) for c in meta.get("cues") or ()),
                last_session=str(meta.get("last_session") or ""),
                last_date=str(meta.get("last_date") or ""),
            )
        )
    return sorted(rows, key=lambda e: (e.type, e.name.lower(), e.path))


def render(files: Mapping[str, str]) -> str:
    """Return the text of ``index.md`` for the entity ``files`` (path → text)."""
    lines = [
        "# Index",
        "",
        "Entities in this memory. Rebuilt from each file's front matter on every session.",
        "",
        "| name | aliases | type | path | cues | last change |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for e in entries(files):
        last = f"{e.last_date} {e.last_session}".strip()
        lines.append(
            f"| {_cell(e.name)} | {_cell(', '.join(e.aliases))} | {e.type} | {e.path} | "
            f"{_cell(', '.join(e.cues))} | {_cell(last)} |"
        )
    return "\n".join(lines) + "\n"
