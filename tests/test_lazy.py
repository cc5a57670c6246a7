"""PEP 562 lazy attributes (:mod:`memrepo._lazy`) as the package and the writer package use them."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import memrepo
import memrepo.writer
import pytest
from memrepo._lazy import lazy_attributes


def _fresh_interpreter(code: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter (nothing imported yet); return the JSON it prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_unknown_name_raises_attribute_error_naming_the_module():
    with pytest.raises(AttributeError, match=r"^module 'memrepo' has no attribute 'nope'$"):
        _ = memrepo.nope
    with pytest.raises(AttributeError, match=r"^module 'memrepo.writer' has no attribute 'Nope'$"):
        _ = memrepo.writer.Nope
    assert not hasattr(memrepo, "nope")
    assert getattr(memrepo.writer, "Nope", "default") == "default"


def test_a_name_is_imported_on_first_access_and_kept():
    code = (
        "import json, sys\n"
        "import memrepo.writer\n"
        "before = 'memrepo.writer.llm' in sys.modules\n"
        "listed = 'LLMWriter' in dir(memrepo.writer)\n"
        "cls = memrepo.writer.LLMWriter\n"
        "print(json.dumps({'before': before, 'listed': listed,\n"
        "    'after': 'memrepo.writer.llm' in sys.modules,\n"
        "    'same': cls is sys.modules['memrepo.writer.llm'].LLMWriter,\n"
        "    'cached': vars(memrepo.writer).get('LLMWriter') is cls,\n"
        "    'api': 'memrepo.api' in sys.modules}))\n"
    )
    assert _fresh_interpreter(code) == {
        "before": False,
        "listed": True,
        "after": True,
        "same": True,
        "cached": True,
        "api": False,
    }


def test_the_package_loads_its_public_names_only_when_read():
    code = (
        "import json, sys\n"
        "import memrepo\n"
        "loaded = lambda: sorted(m for m in sys.modules if m.startswith('memrepo.'))\n"
        "first = loaded()\n"
        "memory = memrepo.Memory\n"
        "print(json.dumps({'first': first, 'api': 'memrepo.api' in sys.modules,\n"
        "    'writer_llm': 'memrepo.writer.llm' in sys.modules}))\n"
    )
    result = _fresh_interpreter(code)
    assert result["first"] == ["memrepo._lazy", "memrepo.errors"]
    assert result["api"] is True
    assert result["writer_llm"] is False


def test_helper_on_a_module_of_its_own():
    module = types.ModuleType("pkg")
    table = {"dumps": "json", "missing": "no_such_module_for_memrepo_tests"}
    getter, lister = lazy_attributes("pkg", table, vars(module))
    module.__getattr__ = getter
    module.__dir__ = lister
    assert "dumps" not in vars(module)
    assert module.dumps is json.dumps
    assert vars(module)["dumps"] is json.dumps  # kept: the next read does not ask again
    assert dir(module) == sorted({*vars(module), "dumps", "missing"})
    with pytest.raises(AttributeError, match=r"^module 'pkg' has no attribute 'loads'$"):
        _ = module.loads
    with pytest.raises(ModuleNotFoundError):  # a table entry naming no module fails loudly
        _ = module.missing


def _modules_after(code: str, tmp_path) -> list[str]:
    """Run ``code`` (after settings on a filesystem store under ``tmp_path``) in a new interpreter;
    return the ``memrepo`` modules loaded at its end."""
    setup = (
        "import json, sys\n"
        "from memrepo import bootstrap\n"
        "from memrepo.settings import Settings\n"
        f"settings = Settings.from_env({{'MEMREPO_STORE': {(tmp_path / 'store').as_uri()!r},\n"
        f"    'MEMREPO_TMP_DIR': {str(tmp_path)!r},\n"
        f"    'MEMREPO_CACHE_DIR': {str(tmp_path / 'c')!r}}})\n"
    )
    end = "print(json.dumps(sorted(m for m in sys.modules if m.startswith('memrepo'))))\n"
    return _fresh_interpreter(setup + code + end)  # type: ignore[return-value]


def test_retrieval_of_a_user_without_memory_loads_neither_writer_nor_engine(tmp_path):
    loaded = _modules_after(
        "from memrepo.handlers import handle_context_request\n"
        "body = json.dumps({'user_id': 'nobody', 'max_tokens': 2000,\n"
        "    'conversation': [{'role': 'user', 'content': 'How is Sarah?'}]}).encode()\n"
        "response = handle_context_request(bootstrap.retriever(settings), method='POST',\n"
        "    body=body, headers={}, auth_token=None, default_max_tokens=2000)\n"
        "assert response.status == 200 and response.body['context'] == '', response\n",
        tmp_path,
    )
    assert "memrepo.retrieval.service" in loaded and "memrepo.conversation" in loaded
    not_needed = (
        "memrepo.writer", "memrepo.events", "memrepo.envelope", "memrepo.transcript",  # writer's
        "memrepo.retrieval.plan", "memrepo.retrieval.resolver",  # the engine
        "memrepo.retrieval.deterministic", "memrepo.retrieval.agent", "memrepo.tokens",
        "memrepo.llm", "memrepo.sandbox",
        "memrepo.workspace", "memrepo.repocache", "memrepo.chain", "memrepo.gitcli",  # git
    )
    assert [m for m in loaded if m.startswith(not_needed)] == []
    assert list(tmp_path.glob("memrepo-*")) == [] and not (tmp_path / "c").exists()


def test_a_rejected_session_event_loads_nothing_of_retrieval(tmp_path):
    loaded = _modules_after(
        "import base64\n"
        "from memrepo.handlers import handle_session_message\n"
        "data = {'message': {'data': base64.b64encode(b'not json').decode(), 'messageId': '1'},\n"
        "        'subscription': 'projects/p/subscriptions/s'}\n"
        "outcome = handle_session_message(bootstrap.writer(settings), data,\n"
        "    max_transcript_bytes=settings.max_transcript_bytes)\n"
        "assert outcome.status == 'rejected', outcome\n",
        tmp_path,
    )
    assert "memrepo.envelope" in loaded
    assert [m for m in loaded if m.startswith(("memrepo.retrieval", "memrepo.conversation",
                                               "memrepo.tokens", "memrepo.llm"))] == []


@pytest.mark.parametrize(
    ("function", "other"),
    [
        ("retrieval", ("memrepo.writer", "memrepo.events", "memrepo.envelope", "memrepo.tokens",
                       "memrepo.retrieval.plan", "memrepo.retrieval.resolver", "memrepo.llm")),
        ("writer", ("memrepo.retrieval", "memrepo.conversation", "memrepo.tokens",
                    "memrepo.writer.llm", "memrepo.llm")),
    ],
)
def test_each_function_preloads_its_own_path_only(function, other):
    main = Path(__file__).resolve().parents[1] / "functions" / function
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(main)!r})\n"
        "import main\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('memrepo'))))\n"
    )
    loaded = _fresh_interpreter(code)
    assert [m for m in loaded if m.startswith(other)] == []  # type: ignore[union-attr]
