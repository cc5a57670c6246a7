"""The per-user repository layout and the ontology (entity types and their folders), as data.

Paths are built here from validated ids and code-made slugs only (see :mod:`memrepo.ids`)::

    profile.md                    who the user is (always loaded)
    index.md                      manifest of entities, rebuilt in code from front matter
    memories/people/<slug>.md     one file per person
    memories/contexts/<slug>.md   projects, places, hobbies, work, health ...
    timeline/YYYY-MM.md           one dated entry per session
    sessions/YYYY/MM/<id>.md      the raw transcript of each session

A deployment may replace :data:`DEFAULT_ONTOLOGY` with its own :class:`Ontology`, for example from
a JSON file named by the ``MEMREPO_ONTOLOGY`` setting (:func:`load_ontology`)::

    {"types": [
      {"name": "person", "folder": "memories/people", "description": "a person in the user's life"},
      {"name": "pet", "folder": "memories/pets", "description": "an animal the user cares for"},
      {"name": "context", "folder": "memories/contexts", "description": "a project, place, hobby"}
    ]}

Folders must be ``memories/<slug>``; the last type is where unknown types are filed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

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
            EntityType(
                "context", "memories/contexts", "a project, place, hobby, job or health topic"
            ),
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

_TYPE_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
_FOLDER = re.compile(r"memories/[a-z0-9][a-z0-9-]{0,59}")


def ontology_from_json(data: Any) -> Ontology:
    """Return the :class:`Ontology` described by decoded JSON (see the module docstring).

    Raises:
        ValueError: not ``{"types": [...]}`` with 1-20 types, a name not matching
            ``[a-z][a-z0-9_-]*``, a folder not ``memories/<slug>``, or a repeated name or folder.
    """
    types = data.get("types") if isinstance(data, dict) else None
    if not isinstance(types, list) or not 1 <= len(types) <= 20:
        raise ValueError('ontology must be {"types": [...]} with 1 to 20 entity types')
    kinds: list[EntityType] = []
    for i, item in enumerate(types):
        if not isinstance(item, dict):
            raise ValueError(f"ontology types[{i}] must be an object, got {type(item).__name__}")
        name, folder = item.get("name"), item.get("folder")
        description = str(item.get("description") or name)[:200]
        if not isinstance(name, str) or not _TYPE_NAME.fullmatch(name):
            raise ValueError(f"ontology types[{i}].name {name!r} must match [a-z][a-z0-9_-]*")
        if not isinstance(folder, str) or not _FOLDER.fullmatch(folder):
            raise ValueError(f"ontology types[{i}].folder {folder!r} must be memories/<slug>")
        kinds.append(EntityType(name, folder, description))
    for attr in ("name", "folder"):
        values = [getattr(k, attr) for k in kinds]
        if len(set(values)) != len(values):
            raise ValueError(f"ontology has a repeated type {attr}: {values}")
    return Ontology(tuple(kinds))


def load_ontology(path: Path | str | None) -> Ontology:
    """Return the ontology of the JSON file at ``path``, or :data:`DEFAULT_ONTOLOGY` for ``None``.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not JSON or not a valid ontology (see :func:`ontology_from_json`).
    """
    if path is None:
        return DEFAULT_ONTOLOGY
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"ontology file {path} is not JSON: {exc}") from exc
    return ontology_from_json(data)


def timeline_path(when: datetime) -> str:
    """Return ``timeline/YYYY-MM.md`` for the month of ``when`` (in its own offset)."""
    return f"timeline/{when:%Y-%m}.md"


def session_path(session_id: str, when: datetime) -> str:
    """Return ``sessions/YYYY/MM/<session_id>.md`` (the id validated)."""
    return f"sessions/{when:%Y/%m}/{validate_session_id(session_id)}.md"
