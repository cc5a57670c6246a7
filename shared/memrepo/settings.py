"""One frozen settings object: explicit argument, then environment variable, then default.

The core never reads ``os.environ``: entry points call :meth:`Settings.from_env` with the
environment (or tests pass a dict) and hand the object down. A row continued on the next line
has empty first cells.

| setting                | variable                         | default                              |
|------------------------|----------------------------------|--------------------------------------|
| store_url              | ``MEMREPO_STORE``                | ``file://$PWD/.memrepo``             |
| tmp_dir                | ``MEMREPO_TMP_DIR``              | system temp dir                      |
| cache_dir              | ``MEMREPO_CACHE_DIR``            | ``<system temp>/memrepo-cache``      |
| cache_max_bytes        | ``MEMREPO_CACHE_MAX_BYTES``      | 268,435,456 bytes (256 MiB); 0: off  |
| chain_max_increments   | ``MEMREPO_CHAIN_MAX_INCREMENTS`` | 64 increments before compaction      |
| max_transcript_bytes   | ``MEMREPO_MAX_TRANSCRIPT_BYTES`` | 1,000,000 bytes                      |
| write_max_attempts     | ``MEMREPO_WRITE_MAX_ATTEMPTS``   | 10 rounds                            |
| auth_token             | ``MEMREPO_AUTH_TOKEN``           | none (no bearer check)               |
| max_tokens_limit       | ``MEMREPO_MAX_TOKENS_LIMIT``     | 32,000 tokens                        |
| default_max_tokens     | ``MEMREPO_DEFAULT_MAX_TOKENS``   | 2,000 tokens                         |
| retrieval_deadline_ms  | ``MEMREPO_RETRIEVAL_DEADLINE_MS``| 8,000 ms                             |
| engine                 | ``MEMREPO_ENGINE``               | ``auto`` (llm if an API key is set)  |
| llm_api_key            | ``OPENROUTER_API_KEY`` or ``OPENAI_API_KEY`` | none                     |
| llm_base_url           | ``MEMREPO_LLM_BASE_URL``         | ``https://openrouter.ai/api/v1``     |
| writer_model           | ``MEMREPO_WRITER_MODEL``         | ``openai/gpt-4o-mini``               |
| retrieval_model        | ``MEMREPO_RETRIEVAL_MODEL``      | ``openai/gpt-4o-mini``               |
| retrieval_max_turns    | ``MEMREPO_RETRIEVAL_MAX_TURNS``  | 4 LLM calls per context request      |
| llm_timeout_s          | ``MEMREPO_LLM_TIMEOUT_S``        | 60 s per HTTP request                |
| llm_max_retries        | ``MEMREPO_LLM_MAX_RETRIES``      | 3 retries (429, 5xx, timeout)        |
| llm_json_mode          | ``MEMREPO_LLM_JSON_MODE``        | ``json_object`` (json_schema, off)   |
| writer_max_llm_calls   | ``MEMREPO_WRITER_MAX_LLM_CALLS`` | 8 requests per session               |
| writer_max_llm_tokens  | ``MEMREPO_WRITER_MAX_LLM_TOKENS``| 60,000 tokens (in + out) per session |
| writer_deadline_s      | ``MEMREPO_WRITER_DEADLINE_S``    | 240 s of LLM work per session        |
| ontology_path          | ``MEMREPO_ONTOLOGY``             | none (people and contexts)           |
| mirror_url             | ``MEMREPO_MIRROR_URL``           | none (no mirror); may hold a         |
|                        |                                  | ``{user_id}`` placeholder            |
| mirror_token           | ``MEMREPO_MIRROR_TOKEN``         | none                                 |
| mirror_token_secret    | ``MEMREPO_MIRROR_TOKEN_SECRET``  | none; a Secret Manager version,      |
|                        |                                  | ``projects/P/secrets/S/versions/V``  |
| mirror_username        | ``MEMREPO_MIRROR_USERNAME``      | ``x-access-token`` (Basic auth user) |
| mirror_timeout_s       | ``MEMREPO_MIRROR_TIMEOUT_S``     | 60 s per push                        |
| mirror_background      | ``MEMREPO_MIRROR_BACKGROUND``    | false (push inline after the save)   |
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

_ENV = {
    "store_url": "MEMREPO_STORE",
    "tmp_dir": "MEMREPO_TMP_DIR",
    "cache_dir": "MEMREPO_CACHE_DIR",
    "cache_max_bytes": "MEMREPO_CACHE_MAX_BYTES",
    "chain_max_increments": "MEMREPO_CHAIN_MAX_INCREMENTS",
    "max_transcript_bytes": "MEMREPO_MAX_TRANSCRIPT_BYTES",
    "write_max_attempts": "MEMREPO_WRITE_MAX_ATTEMPTS",
    "auth_token": "MEMREPO_AUTH_TOKEN",
    "max_tokens_limit": "MEMREPO_MAX_TOKENS_LIMIT",
    "default_max_tokens": "MEMREPO_DEFAULT_MAX_TOKENS",
    "retrieval_deadline_ms": "MEMREPO_RETRIEVAL_DEADLINE_MS",
    "engine": "MEMREPO_ENGINE",
    "llm_base_url": "MEMREPO_LLM_BASE_URL",
    "writer_model": "MEMREPO_WRITER_MODEL",
    "retrieval_model": "MEMREPO_RETRIEVAL_MODEL",
    "retrieval_max_turns": "MEMREPO_RETRIEVAL_MAX_TURNS",
    "llm_timeout_s": "MEMREPO_LLM_TIMEOUT_S",
    "llm_max_retries": "MEMREPO_LLM_MAX_RETRIES",
    "llm_json_mode": "MEMREPO_LLM_JSON_MODE",
    "writer_max_llm_calls": "MEMREPO_WRITER_MAX_LLM_CALLS",
    "writer_max_llm_tokens": "MEMREPO_WRITER_MAX_LLM_TOKENS",
    "writer_deadline_s": "MEMREPO_WRITER_DEADLINE_S",
    "ontology_path": "MEMREPO_ONTOLOGY",
    "mirror_url": "MEMREPO_MIRROR_URL",
    "mirror_token": "MEMREPO_MIRROR_TOKEN",
    "mirror_token_secret": "MEMREPO_MIRROR_TOKEN_SECRET",
    "mirror_username": "MEMREPO_MIRROR_USERNAME",
    "mirror_timeout_s": "MEMREPO_MIRROR_TIMEOUT_S",
    "mirror_background": "MEMREPO_MIRROR_BACKGROUND",
}


class Settings(BaseModel):
    """memrepo's configuration (see the module docstring for variables and defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    store_url: str = Field(default_factory=lambda: (Path.cwd() / ".memrepo").as_uri())
    tmp_dir: Path | None = None
    cache_dir: Path | None = None
    cache_max_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    chain_max_increments: int = Field(default=64, ge=1, le=10_000)
    max_transcript_bytes: int = Field(default=1_000_000, gt=0)
    write_max_attempts: int = Field(default=10, ge=1, le=100)
    auth_token: SecretStr | None = None
    max_tokens_limit: int = Field(default=32_000, ge=1)
    default_max_tokens: int = Field(default=2_000, ge=1)
    retrieval_deadline_ms: int = Field(default=8_000, ge=100)
    engine: Literal["auto", "deterministic", "llm"] = "auto"
    llm_api_key: SecretStr | None = None
    llm_base_url: str = "https://openrouter.ai/api/v1"
    writer_model: str = "openai/gpt-4o-mini"
    retrieval_model: str = "openai/gpt-4o-mini"
    retrieval_max_turns: int = Field(default=4, ge=1, le=10)
    llm_timeout_s: float = Field(default=60.0, gt=0, le=600)
    llm_max_retries: int = Field(default=3, ge=0, le=10)
    llm_json_mode: Literal["json_object", "json_schema", "off"] = "json_object"
    writer_max_llm_calls: int = Field(default=8, ge=1, le=100)
    writer_max_llm_tokens: int = Field(default=60_000, ge=1_000)
    writer_deadline_s: float = Field(default=240.0, gt=0, le=3_600)
    ontology_path: Path | None = None
    mirror_url: str | None = None
    mirror_token: SecretStr | None = None
    mirror_token_secret: str | None = Field(
        default=None, pattern=r"^projects/[^/]+/secrets/[^/]+/versions/[^/]+$"
    )
    mirror_username: str = "x-access-token"
    mirror_timeout_s: float = Field(default=60.0, gt=0, le=600)
    mirror_background: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> Settings:
        """Build settings from ``overrides``, then ``environ``, then defaults.

        Raises:
            pydantic.ValidationError: a value has the wrong type or range.
        """
        values: dict[str, Any] = {}
        for name, variable in _ENV.items():
            if environ.get(variable):
                values[name] = environ[variable]
        key = environ.get("OPENROUTER_API_KEY") or environ.get("OPENAI_API_KEY")
        if key:
            values["llm_api_key"] = key
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @model_validator(mode="after")
    def _key_for_hosted_endpoints(self) -> Settings:
        """Refuse ``engine=llm`` against a hosted endpoint with no API key (every call would 401).

        A local server (llama.cpp, vLLM) may need no key, so only the known hosted base URLs are
        checked.
        """
        hosted = any(h in self.llm_base_url for h in ("openrouter.ai", "api.openai.com"))
        if self.engine == "llm" and self.llm_api_key is None and hosted:
            raise ValueError(
                f"MEMREPO_ENGINE=llm with {self.llm_base_url} needs OPENROUTER_API_KEY or "
                "OPENAI_API_KEY (or MEMREPO_LLM_BASE_URL pointing at a server that takes none)"
            )
        return self

    @property
    def use_llm(self) -> bool:
        """Whether the LLM engines run: ``llm``, or ``auto`` with an API key configured."""
        return self.engine == "llm" or (self.engine == "auto" and self.llm_api_key is not None)
