"""The sandbox behind the retrieval agent's one tool, ``run(command)``.

It reads inside one repository only: commands are parsed like sh(1), decided by an allowlist of
read-only programs, options and paths, and run as argv lists without a shell, under one
wall-clock limit and one output cap (DESIGN.md, invariant 4).

Example::

    sb = Sandbox(repo_root, timeout_s=5.0, max_output_bytes=32_000)
    result = sb.run("grep -n birthday memories/people/*.md | head -20")
"""

from memrepo.sandbox.result import RunResult, SandboxRefusal
from memrepo.sandbox.sandbox import Sandbox

__all__ = ["RunResult", "Sandbox", "SandboxRefusal"]
