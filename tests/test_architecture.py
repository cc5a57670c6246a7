"""Architecture rules: the core imports no cloud or web SDK; the public surface is honest."""

from __future__ import annotations

import ast
from pathlib import Path

import memrepo

PACKAGE = Path(memrepo.__file__).parent
ADAPTERS = {"adapters", "devstack"}
FORBIDDEN = ("google.cloud", "google.api_core", "openai", "flask", "functions_framework")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_core_imports_no_cloud_sdk():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ADAPTERS or rel.parts[0] == "llm":
            continue
        for name in _imports(path):
            if name.startswith(FORBIDDEN):
                offenders.append(f"{rel}: {name}")
    assert offenders == []


def test_all_is_honest():
    for name in memrepo.__all__:
        assert hasattr(memrepo, name), name
    public = {n for n in vars(memrepo) if not n.startswith("_")} - {
        "api",
        "errors",
        "events",
        "retrieval",
        "settings",
        "writer",
        "ids",
        "workspace",
        "gitcli",
        "repos",
        "manifest",
        "chain",
        "repocache",
        "store",
        "layout",
        "text",
        "frontmatter",
        "transcript",
        "timeline",
        "index",
        "conversation",
        "tokens",
        "bootstrap",
        "handlers",
        "envelope",
        "logs",
        "locomo",
        "sandbox",
        "adapters",
        "cli",
        "llm",
        "devstack",
        "evaluation",
        "operations",
        "client",
        "prefork",
    }
    assert public == set(memrepo.__all__)


def test_importing_the_package_loads_no_sdk():
    import subprocess
    import sys

    code = (
        "import sys, memrepo, memrepo.handlers, memrepo.bootstrap\n"
        "heavy = [m for m in ('google.cloud.storage', 'google.cloud.pubsub_v1', 'openai',"
        " 'tiktoken') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
