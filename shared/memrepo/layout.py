"""The per-user repository layout and the ontology (entity types and their folders), as data.

Paths are built here from validated ids and code-made slugs only (see :mod:`memrepo.ids`)::

    profile.md                    who the user is (always loaded)
    index.md                      manifest of entities, rebuilt in code from front matter
    memories/people/<slug>.md     one file per person
    memories/contexts/<slug>.md   projects, places, hobbies, work, health ...
    timeline/YYYY-MM.md           one dated entry per session
    sessions/YYYY/MM/<id>.md      the raw transcript of each session

A deployment may replace :data:`DEFAULT_ONTOLOGY` with its own :class:`Ontology`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from memrepo.ids import slugify, validate_session_id

PROFILE = "profile.md"
INDEX = "index.md"


@dataclass(frozen=True)
class EntityType:
    """One kind of entity and the folder its files live in."""

    name: str
    folder: str
    description: str


@dataclass(frozen=True)
class Ontology:
    """The entity types a deployment recognises, keyed by type name."""

    types: tuple[EntityType, ...] = field(
        default=(
            EntityType("person", "memories/people", "a person in the user's life"),
            EntityType("context", "memories/contexts", "a project, place, hobby, job or health topic"),
        )
    )

    def folder(self, type_name: str) -> str:
        """Return the folder of ``type_name``; unknown types fall back to the last type's folder."""
        for kind in self.types:
            if kind.name == type_name:
                return kind.folder
        return self.types[-1].folder

    def entity_path(self, type_name: str, name: str) -> str:
        """Return ``<folder>/<slug>.md`` for an entity, the slug made in code from ``name``."""
        return f"{self.folder(type_name)}/{slugify(name)}.md"

    def folders(self) -> tuple[str, ...]:
        """Return every entity folder."""
        return tuple(kind.folder for kind in self.types)


DEFAULT_ONTOLOGY = Ontology()


def timeline_path(when: datetime) -> str:
    """Return ``timeline/YYYY-MM.md`` for the month of ``when`` (in its own offset)."""
    return f"timeline/{when:%Y-%m}.md"


def session_path(session_id: str, when: datetime) -> str:
    """Return ``sessions/YYYY/MM/<session_id>.md`` (the id validated)."""
    return f"sessions/{when:%Y/%m}/{validate_session_id(session_id)}.md"
