"""Checks of the deployment: Terraform formatting and wiring, checkov, and the function archives.

Providers cannot be downloaded here, so ``terraform init/validate/plan`` never run in tests. The
wiring is asserted on the configuration itself, parsed with python-hcl2: which topic feeds the
writer, where failed deliveries go and who may put them there, which identity each function runs
as, and what each identity may do. The parser's output shape differs between python-hcl2 releases
(and the ``bc-python-hcl2`` fork that checkov installs under the same ``hcl2`` module name), so
:func:`_clean`, :func:`_attr` and :func:`_attr_list` read all of them alike.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "infra"
PACKAGER = ROOT / "scripts" / "package_functions.py"

PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
PUBSUB_AGENT = re.compile(
    r"^serviceAccount:service-\$\{data\.google_project\.\w+\.number\}"
    r"@gcp-sa-pubsub\.iam\.gserviceaccount\.com$"
)
# Storage roles that allow no create, overwrite or delete of objects.
READ_ONLY_STORAGE_ROLES = {"roles/storage.objectViewer", "roles/storage.legacyObjectReader"}


# ---------------------------------------------------------------------------------------------
# Reading the configuration
# ---------------------------------------------------------------------------------------------


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]
    return text


def _clean(node: Any) -> Any:
    """Drop parser metadata (``__start_line__``, ``__is_block__`` ...) and quotes around strings."""
    if isinstance(node, dict):
        return {
            _unquote(str(key)): _clean(value)
            for key, value in node.items()
            if not str(key).startswith("__")
        }
    if isinstance(node, list):
        return [_clean(item) for item in node]
    if isinstance(node, str):
        return _unquote(node)
    return node


def _attr(body: dict[str, Any], key: str, default: Any = None) -> Any:
    """Return a scalar attribute (some parsers wrap every attribute value in a 1-item list)."""
    value = body.get(key, default)
    while isinstance(value, list) and len(value) == 1 and not isinstance(value[0], dict):
        value = value[0]
    return value


def _attr_list(body: dict[str, Any], key: str) -> list[Any]:
    """Return a list attribute as a flat list."""
    value = body.get(key, [])
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    return value if isinstance(value, list) else [value]


def _blocks(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """Return the nested blocks named ``key`` (a list of bodies, empty when there is none)."""
    value = body.get(key, [])
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _block(body: dict[str, Any], key: str) -> dict[str, Any]:
    found = _blocks(body, key)
    assert len(found) == 1, f"expected exactly one {key} block, found {len(found)}"
    return found[0]


@cache
def _config() -> dict[str, dict[str, Any]]:
    """Return ``{"resource": {type: {name: body}}, "data": ..., "variable": {name: body},
    "locals": {name: value}, "output": ...}`` merged over every ``infra/*.tf``."""
    hcl2 = pytest.importorskip(
        "hcl2", reason="python-hcl2 is a dev dependency (pip install -e .[dev])"
    )
    merged: dict[str, dict[str, Any]] = {
        "resource": {},
        "data": {},
        "variable": {},
        "locals": {},
        "output": {},
    }
    files = sorted(INFRA.glob("*.tf"))
    assert files, f"no .tf files in {INFRA}"
    for path in files:
        with path.open(encoding="utf-8") as handle:
            parsed = _clean(hcl2.load(handle))
        for kind in ("resource", "data"):
            for entry in parsed.get(kind, []):
                for rtype, named in entry.items():
                    for name, body in named.items():
                        assert name not in merged[kind].get(rtype, {}), (
                            f"{kind} {rtype}.{name} twice"
                        )
                        merged[kind].setdefault(rtype, {})[name] = body
        for kind in ("variable", "output"):
            for entry in parsed.get(kind, []):
                merged[kind].update(entry)
        for entry in parsed.get("locals", []):
            merged["locals"].update({key: _attr(entry, key) for key in entry})
    return merged


def _resources(rtype: str) -> dict[str, dict[str, Any]]:
    return _config()["resource"].get(rtype, {})


def _resource(rtype: str, name: str) -> dict[str, Any]:
    found = _resources(rtype)
    assert name in found, f"resource {rtype}.{name} is missing (have {sorted(found)})"
    return found[name]


def _default(variable: str) -> Any:
    return _attr(_config()["variable"][variable], "default")


def _refs(value: Any, rtype: str) -> set[str]:
    """Return the names of the ``rtype`` resources that ``value`` (an expression) refers to."""
    return set(re.findall(rf"\b{re.escape(rtype)}\.(\w+)\b", str(value)))


def _resolve_local(value: str) -> str:
    """Replace a whole-value ``${local.name}`` by the local's own expression."""
    match = re.fullmatch(r"\$\{local\.(\w+)\}", value)
    return str(_config()["locals"][match.group(1)]) if match else value


def _iam_grants() -> list[tuple[str, str, dict[str, Any]]]:
    """Return ``(address, member expression, body)`` of every *_iam_member resource."""
    grants = []
    for rtype, named in _config()["resource"].items():
        if rtype.endswith("_iam_member"):
            for name, body in named.items():
                grants.append((f"{rtype}.{name}", _resolve_local(str(_attr(body, "member"))), body))
    return grants


def _grants_to(account: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [g for g in _iam_grants() if account in _refs(g[1], "google_service_account")]


# ---------------------------------------------------------------------------------------------
# terraform fmt
# ---------------------------------------------------------------------------------------------


def test_terraform_fmt_is_clean() -> None:
    terraform = shutil.which("terraform")
    if terraform is None:
        pytest.skip(
            "terraform is not on PATH: neither Debian nor a maintained PyPI package ships it, so a "
            "fresh machine may lack it (install it to run this check)"
        )
    done = subprocess.run(
        [terraform, "fmt", "-check", "-recursive", "-diff", str(INFRA)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"terraform fmt would change:\n{done.stdout}\n{done.stderr}"


# ---------------------------------------------------------------------------------------------
# Wiring: session topic -> push subscription -> writer; dead letters
# ---------------------------------------------------------------------------------------------


def _writer_subscriptions() -> dict[str, dict[str, Any]]:
    return {
        name: body
        for name, body in _resources("google_pubsub_subscription").items()
        for push in _blocks(body, "push_config")
        if "writer" in _refs(_attr(push, "push_endpoint"), "google_cloudfunctions2_function")
    }


def test_only_the_session_topic_feeds_the_writer_through_one_push_subscription() -> None:
    assert "session_ended" in _resources("google_pubsub_topic")
    subscriptions = _writer_subscriptions()
    assert list(subscriptions) == ["writer_push"], (
        "exactly one subscription must push to the writer"
    )
    body = subscriptions["writer_push"]
    assert _refs(_attr(body, "topic"), "google_pubsub_topic") == {"session_ended"}
    # No second delivery path: no Eventarc trigger on the writer, none anywhere else either.
    assert not _blocks(_resource("google_cloudfunctions2_function", "writer"), "event_trigger")
    assert not _resources("google_eventarc_trigger")


def test_push_is_authenticated_as_a_dedicated_invoker_account() -> None:
    push = _block(_resource("google_pubsub_subscription", "writer_push"), "push_config")
    oidc = _block(push, "oidc_token")
    assert _refs(_attr(oidc, "service_account_email"), "google_service_account") == {"pubsub_push"}
    assert "writer" in _refs(_attr(oidc, "audience"), "google_cloudfunctions2_function")
    invokers = [
        (address, member, body)
        for address, member, body in _grants_to("pubsub_push")
        if address.startswith("google_cloud_run_service_iam_member.")
    ]
    assert len(invokers) == 1, invokers
    _, _, body = invokers[0]
    assert _attr(body, "role") == "roles/run.invoker"
    assert _refs(_attr(body, "service"), "google_cloudfunctions2_function") == {"writer"}
    # pubsub_push may do nothing else (no bucket, secret or project role).
    assert {a.split(".")[0] for a, _, _ in _grants_to("pubsub_push")} == {
        "google_cloud_run_service_iam_member"
    }


def test_failed_deliveries_go_to_the_dead_letter_topic() -> None:
    body = _resource("google_pubsub_subscription", "writer_push")
    policy = _block(body, "dead_letter_policy")
    assert _refs(_attr(policy, "dead_letter_topic"), "google_pubsub_topic") == {"dead_letter"}
    assert _attr(policy, "max_delivery_attempts") == "${var.max_delivery_attempts}"
    assert _default("max_delivery_attempts") == 5
    assert _blocks(body, "retry_policy"), "retries need a backoff policy"
    # A delivery must not time out (and be redelivered) while the writer is still working.
    assert _attr(body, "ack_deadline_seconds") == "${var.writer_ack_deadline_seconds}"
    assert _default("writer_timeout_seconds") < _default("writer_ack_deadline_seconds") <= 600
    preconditions = _blocks(_block(body, "lifecycle"), "precondition")
    assert any("writer_timeout_seconds" in str(_attr(p, "condition")) for p in preconditions)
    # The dead-letter topic keeps messages, and operators can read them.
    dead_letter = _resource("google_pubsub_topic", "dead_letter")
    assert _attr(dead_letter, "message_retention_duration")
    readers = [
        b
        for b in _resources("google_pubsub_subscription").values()
        if _refs(_attr(b, "topic"), "google_pubsub_topic") == {"dead_letter"}
    ]
    assert readers and all(not _blocks(b, "push_config") for b in readers), "a pull subscription"
    for sub in [body, *readers]:
        assert _attr(_block(sub, "expiration_policy"), "ttl") == "", "subscriptions never expire"


def test_the_pubsub_service_agent_may_dead_letter() -> None:
    publishers = [
        (member, body)
        for address, member, body in _iam_grants()
        if address.startswith("google_pubsub_topic_iam_member.")
        and _refs(_attr(body, "topic"), "google_pubsub_topic") == {"dead_letter"}
        and _attr(body, "role") == "roles/pubsub.publisher"
    ]
    assert any(PUBSUB_AGENT.match(member) for member, _ in publishers), publishers
    subscribers = [
        member
        for address, member, body in _iam_grants()
        if address.startswith("google_pubsub_subscription_iam_member.")
        and _refs(_attr(body, "subscription"), "google_pubsub_subscription") == {"writer_push"}
        and _attr(body, "role") == "roles/pubsub.subscriber"
    ]
    assert any(PUBSUB_AGENT.match(member) for member in subscribers), subscribers
    assert "this" in _config()["data"].get("google_project", {}), "project number lookup"


# ---------------------------------------------------------------------------------------------
# Functions and identities
# ---------------------------------------------------------------------------------------------


def test_each_function_runs_as_its_own_service_account() -> None:
    accounts = {}
    for function, entry_point in (("writer", "on_session_ended"), ("retrieval", "get_context")):
        body = _resource("google_cloudfunctions2_function", function)
        build = _block(body, "build_config")
        assert _attr(build, "entry_point") == entry_point
        assert _attr(build, "runtime") == "${var.python_runtime}"
        assert _refs(_attr(build, "service_account"), "google_service_account") == {"build"}
        source = _block(_block(build, "source"), "storage_source")
        assert _refs(_attr(source, "object"), "google_storage_bucket_object") == {
            f"{function}_source"
        }
        service = _block(body, "service_config")
        accounts[function] = _refs(
            _attr(service, "service_account_email"), "google_service_account"
        )
        assert accounts[function] == {function}
        assert _attr(service, "all_traffic_on_latest_revision") is True
    assert _default("python_runtime") in ("python311", "python312")
    assert set(_resources("google_service_account")) >= {
        "writer",
        "retrieval",
        "pubsub_push",
        "build",
    }


def test_writer_is_internal_and_retrieval_is_configurable() -> None:
    writer = _block(_resource("google_cloudfunctions2_function", "writer"), "service_config")
    assert _attr(writer, "ingress_settings") == "${var.writer_ingress_settings}"
    assert _default("writer_ingress_settings") == "ALLOW_INTERNAL_ONLY"
    retrieval = _block(_resource("google_cloudfunctions2_function", "retrieval"), "service_config")
    assert _attr(retrieval, "ingress_settings") == "${var.retrieval_ingress_settings}"


def test_source_objects_are_named_by_their_content() -> None:
    for name in ("writer_source", "retrieval_source"):
        body = _resource("google_storage_bucket_object", name)
        assert "filemd5(" in str(_attr(body, "name")), "a new archive must be a new object"
        assert _refs(_attr(body, "bucket"), "google_storage_bucket") == {"sources"}


def test_functions_read_bundles_from_the_bundles_bucket() -> None:
    locals_ = _config()["locals"]
    assert str(locals_["store_url"]).startswith("gs://${local.bundles_bucket_name}/")
    assert _attr(_resource("google_storage_bucket", "bundles"), "name") == (
        "${local.bundles_bucket_name}"
    )
    for function in ("writer", "retrieval"):
        env = str(locals_[f"{function}_env"])
        assert "MEMREPO_STORE" in env and "local.store_url" in env
        service = _block(_resource("google_cloudfunctions2_function", function), "service_config")
        assert _attr(service, "environment_variables") == f"${{local.{function}_env}}"


def test_nothing_is_public() -> None:
    def strings(node: Any) -> list[str]:
        if isinstance(node, dict):
            return [s for value in node.values() for s in strings(value)]
        if isinstance(node, list):
            return [s for item in node for s in strings(item)]
        return [str(node)]

    everything = strings(_config()["resource"]) + strings(_config()["locals"])
    leaks = [s for s in everything if any(m in s for m in PUBLIC_MEMBERS)]
    assert not leaks, f"public IAM members in the configuration: {leaks}"
    for rtype in _config()["resource"]:
        assert not rtype.endswith(("_iam_binding", "_iam_policy")), (
            f"{rtype}: use additive *_iam_member grants"
        )
    # The invoker list cannot let the public in through a variable either.
    validation = str(_config()["variable"]["retrieval_invoker_members"]["validation"])
    assert all(m in validation for m in PUBLIC_MEMBERS)
    assert _default("retrieval_invoker_members") == []


def test_retrieval_account_cannot_write_bundles() -> None:
    grants = _grants_to("retrieval")
    assert grants, "the retrieval account needs read access"
    for address, _, body in grants:
        role = str(_attr(body, "role"))
        assert not address.startswith("google_project_iam_member."), (
            f"{address}: grant on the bucket or secret, not the project"
        )
        if address.startswith("google_storage_bucket_iam_member."):
            assert role in READ_ONLY_STORAGE_ROLES, f"{address} gives retrieval {role}"
        else:
            assert role == "roles/secretmanager.secretAccessor", f"{address} gives {role}"
    reads = [
        body
        for address, _, body in grants
        if address.startswith("google_storage_bucket_iam_member.")
    ]
    assert any(_refs(_attr(b, "bucket"), "google_storage_bucket") == {"bundles"} for b in reads)


def test_writer_may_write_the_bundles_bucket_only() -> None:
    grants = _grants_to("writer")
    storage = [
        body
        for address, _, body in grants
        if address.startswith("google_storage_bucket_iam_member.")
    ]
    assert [_attr(b, "role") for b in storage] == ["roles/storage.objectUser"]
    assert _refs(_attr(storage[0], "bucket"), "google_storage_bucket") == {"bundles"}
    assert not [a for a, _, _ in grants if a.startswith("google_project_iam_member.")]


def test_secret_values_never_enter_terraform() -> None:
    assert not _resources("google_secret_manager_secret_version"), (
        "secret versions are added with gcloud, never through Terraform state"
    )
    assert set(_resources("google_secret_manager_secret")) == {"llm_api_key", "auth_token"}
    accessors = {
        (
            tuple(sorted(_refs(member, "google_service_account"))),
            tuple(sorted(_refs(_attr(body, "secret_id"), "google_secret_manager_secret"))),
        )
        for address, member, body in _iam_grants()
        if address.startswith("google_secret_manager_secret_iam_member.")
    }
    assert accessors == {
        (("writer",), ("llm_api_key",)),
        (("retrieval",), ("llm_api_key",)),
        (("retrieval",), ("auth_token",)),
    }
    retrieval = _block(_resource("google_cloudfunctions2_function", "retrieval"), "service_config")
    dynamic = str(retrieval.get("dynamic"))
    assert "MEMREPO_AUTH_TOKEN" in dynamic and "auth_token" in dynamic


# ---------------------------------------------------------------------------------------------
# Buckets
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bucket", ["bundles", "sources"])
def test_buckets_are_hardened(bucket: str) -> None:
    body = _resource("google_storage_bucket", bucket)
    assert _attr(body, "uniform_bucket_level_access") is True
    assert _attr(body, "public_access_prevention") == "enforced"
    assert _attr(body, "force_destroy") is False
    assert _attr(_block(body, "versioning"), "enabled") is True
    rules = _blocks(body, "lifecycle_rule")
    assert any(
        _attr(_block(rule, "condition"), "days_since_noncurrent_time")
        == "${var.noncurrent_version_days}"
        and _attr(_block(rule, "action"), "type") == "Delete"
        for rule in rules
    ), "noncurrent versions must expire"
    assert any("encryption" in str(d) for d in _blocks(body, "dynamic")), "optional CMEK"


def test_bundle_versions_are_capped_in_number_too() -> None:
    rules = _blocks(_resource("google_storage_bucket", "bundles"), "lifecycle_rule")
    assert any(
        _attr(_block(rule, "condition"), "num_newer_versions") == "${var.noncurrent_versions_kept}"
        for rule in rules
    )


# ---------------------------------------------------------------------------------------------
# checkov
# ---------------------------------------------------------------------------------------------


def _checkov() -> str | None:
    explicit = os.environ.get("CHECKOV")
    if explicit:
        return explicit
    local = ROOT / ".venv-checkov" / "bin" / "checkov"
    return str(local) if local.exists() else shutil.which("checkov")


def test_every_checkov_skip_says_why() -> None:
    for path in sorted(INFRA.glob("*.tf")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "checkov:skip" in line:
                assert re.search(r"#\s*checkov:skip=CKV2?_[A-Z]+_\d+:\s*\S.{20,}", line), (
                    f"{path.name}:{number}: a skip needs a reason: {line.strip()}"
                )


def test_checkov_finds_nothing() -> None:
    checkov = _checkov()
    if checkov is None:
        pytest.skip("checkov is not installed (pip install checkov, or set CHECKOV=/path)")
    done = subprocess.run(
        [
            checkov,
            "-d",
            str(INFRA),
            "--framework",
            "terraform",
            "--skip-download",
            "--quiet",
            "--compact",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    summary = re.search(
        r"Passed checks: (\d+), Failed checks: (\d+), Skipped checks: (\d+)", done.stdout
    )
    assert summary, f"no checkov summary (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    passed, failed, skipped = (int(n) for n in summary.groups())
    assert failed == 0 and done.returncode == 0, done.stdout
    assert passed > 0
    # A skip that no longer suppresses anything is stale: remove it.
    comments = sum(p.read_text(encoding="utf-8").count("checkov:skip=") for p in INFRA.glob("*.tf"))
    assert skipped == comments, f"{comments} skip comments but checkov skipped {skipped} checks"


# ---------------------------------------------------------------------------------------------
# Function archives
# ---------------------------------------------------------------------------------------------


def _package(root: Path, out: Path) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, str(PACKAGER), "--root", str(root), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    printed = {}
    for line in done.stdout.splitlines():
        digest, path = line.split("  ", 1)
        printed[Path(path).name] = digest
    for name, digest in printed.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    return printed


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _fake_tree(root: Path) -> None:
    _write(
        root / "pyproject.toml",
        "[project]\n"
        'name = "memrepo"\n'
        'dependencies = ["pydantic>=2.6,<3", "functions-framework>=3.8"]\n'
        "[project.optional-dependencies]\n"
        'dev = ["pytest>=8"]\n',
    )
    _write(root / "functions/writer/main.py", "def on_session_ended(event):\n    pass\n")
    _write(root / "functions/retrieval/main.py", "def get_context(request):\n    return 'x'\n")
    package = root / "shared/memrepo"
    _write(package / "__init__.py", '"""memrepo."""\n')
    _write(package / "py.typed", "")
    _write(package / "store/__init__.py", "")
    _write(package / "store/gcs.py", "X = 1\n", mode=0o755)
    _write(package / "__pycache__/store.cpython-311.pyc", "junk")
    _write(package / "devstack/stack.py", "EMULATORS = 1\n")
    _write(package / "tests/test_inner.py", "def test(): pass\n")
    _write(package / "test_helpers.py", "")
    _write(package / ".hidden.py", "")


def _check_archive(path: Path, root: Path, function: str) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        assert names == sorted(names), "entries must be sorted"
        assert {"main.py", "requirements.txt", "memrepo/__init__.py"} <= set(names)
        assert archive.read("main.py") == (root / "functions" / function / "main.py").read_bytes()
        deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
        lines = [
            line
            for line in archive.read("requirements.txt").decode().splitlines()
            if line and not line.startswith("#")
        ]
        assert lines == deps
        for info in archive.infolist():
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.external_attr >> 16 == 0o100644
            assert info.compress_type == zipfile.ZIP_DEFLATED
            assert not info.is_dir()
        bad = [n for n in names if "__pycache__" in n or "/devstack/" in n or n.endswith(".pyc")]
        assert not bad, f"left in the archive: {bad}"
        assert not [
            n
            for n in names
            if not (n in ("main.py", "requirements.txt") or n.startswith("memrepo/"))
        ]
    return names


def test_packaging_is_reproducible_and_complete(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _fake_tree(root)
    first = _package(root, tmp_path / "one")
    # Other mtimes and modes must not change a byte.
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (2_000_000_000, 2_000_000_000))
            path.chmod(0o600)
    second = _package(root, tmp_path / "two")
    assert first == second and set(first) == {"writer.zip", "retrieval.zip"}
    for function in ("writer", "retrieval"):
        one = (tmp_path / "one" / f"{function}.zip").read_bytes()
        assert one == (tmp_path / "two" / f"{function}.zip").read_bytes()
        names = _check_archive(tmp_path / "one" / f"{function}.zip", root, function)
        assert "memrepo/store/gcs.py" in names and "memrepo/py.typed" in names
        assert "memrepo/tests/test_inner.py" not in names
        assert "memrepo/test_helpers.py" not in names and "memrepo/.hidden.py" not in names
    # Content changes do change the archive.
    _write(root / "shared/memrepo/store/gcs.py", "X = 2\n")
    assert _package(root, tmp_path / "three")["writer.zip"] != first["writer.zip"]


def test_packaging_refuses_a_missing_entry_point(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _fake_tree(root)
    (root / "functions/writer/main.py").unlink()
    done = subprocess.run(
        [sys.executable, str(PACKAGER), "--root", str(root), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "functions/writer/main.py not found" in done.stderr


@pytest.mark.skipif(
    not all((ROOT / "functions" / f / "main.py").is_file() for f in ("writer", "retrieval")),
    reason="functions/writer/main.py and functions/retrieval/main.py are not written yet",
)
def test_project_archives_are_reproducible(tmp_path: Path) -> None:
    first = _package(ROOT, tmp_path / "one")
    second = _package(ROOT, tmp_path / "two")
    assert first == second
    for function in ("writer", "retrieval"):
        _check_archive(tmp_path / "one" / f"{function}.zip", ROOT, function)
