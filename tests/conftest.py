"""Shared pytest configuration and fixtures for the memrepo test suite."""

import pathlib
import sys
from collections.abc import Iterator

import pytest

_TESTS_DIR = str(pathlib.Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    # Make test-support modules (e.g. ``scripted_openai``) importable by name.
    sys.path.insert(0, _TESTS_DIR)

from scripted_openai import ScriptedOpenAI  # noqa: E402


@pytest.fixture
def scripted_openai() -> Iterator[ScriptedOpenAI]:
    """A started :class:`ScriptedOpenAI` server, stopped after the test.

    Yields:
        The running server; script it with ``srv.script(...)`` and point
        ``openai.OpenAI(base_url=srv.base_url, ...)`` at it.
    """
    with ScriptedOpenAI() as srv:
        yield srv
