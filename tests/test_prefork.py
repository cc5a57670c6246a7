"""The functions' pre-fork recipe: no GC while importing, objects frozen, GC on again after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import gc, json, os
{before}
import main
print(json.dumps({{"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "plugins": os.environ.get("PYDANTIC_DISABLE_PLUGINS")}}))
"""


def probe(function: str, before: str = "", **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    environ.update(MEMREPO_STORE="file:///nonexistent-memrepo-store", **env)
    out = subprocess.run([sys.executable, "-c", PROBE.format(before=before)],
                         cwd=ROOT / "functions" / function, env=environ, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("function", ["writer", "retrieval"])
def test_main_leaves_the_collector_on_and_the_imports_frozen(function):
    found = probe(function)
    assert found["enabled"] is True
    assert found["frozen"] > 10_000  # the modules' objects, out of the collector's reach
    assert found["plugins"] == "__all__"


def test_an_explicit_plugin_setting_is_kept():
    assert probe("writer", PYDANTIC_DISABLE_PLUGINS="")["plugins"] == ""


def test_the_collector_comes_back_when_an_import_fails(tmp_path):
    (tmp_path / "main.py").write_text(
        "from memrepo import prefork\nprefork.begin()\ntry:\n    import no_such_module\n"
        "finally:\n    prefork.end()\n")
    code = ("import gc\ntry:\n    import main\nexcept ImportError:\n    pass\n"
            "print(gc.isenabled())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "True"
