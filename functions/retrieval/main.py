"""Retrieval function: HTTP ``POST {user_id, conversation, max_tokens}`` → context JSON.

Thin by design: decode the Flask request, call :func:`memrepo.handlers.handle_context_request`,
encode its response. Every log line of the request carries its trace (``traceparent`` or
``X-Cloud-Trace-Context``; the project from ``GOOGLE_CLOUD_PROJECT``), see :mod:`memrepo.logs`.
"""

# ruff: noqa: E402 - the environment is set up before the imports below
from __future__ import annotations

from memrepo import prefork

prefork.begin()  # see memrepo.prefork: no GC while importing, frozen before the fork
try:
    import json
    import os
    from functools import cache

    import flask
    import functions_framework
    import memrepo.conversation  # noqa: F401 - the request's modules, preloaded (see below)
    import memrepo.repos  # noqa: F401
    import memrepo.retrieval.service  # noqa: F401
    import memrepo.store  # noqa: F401
    from memrepo import bootstrap, logs
    from memrepo.handlers import handle_context_request
    from memrepo.settings import Settings
finally:
    prefork.end()

# The library imports lazily, so the first request would import the modules above in gunicorn's
# worker; imported here, before the worker is forked, their pages stay shared between master and
# worker instead of being copied into the worker (about 2 MB less in all, no more time). Only
# what every request needs: the engine, loaded once a user has memory, stays lazy.


@cache
def _settings() -> Settings:
    logs.configure()
    return Settings.from_env(os.environ)


@functions_framework.http
def get_context(request: flask.Request) -> flask.Response:
    """Answer one context request (see :func:`memrepo.handlers.handle_context_request`)."""
    settings = _settings()
    headers = dict(request.headers)
    project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCP_PROJECT")
    with logs.bind(**logs.trace_fields(headers, project)):
        response = handle_context_request(
            bootstrap.retriever(settings),
            method=request.method,
            body=request.get_data(cache=False),
            headers=headers,
            auth_token=settings.auth_token.get_secret_value() if settings.auth_token else None,
            default_max_tokens=settings.default_max_tokens,
        )
    return flask.Response(
        json.dumps(response.body, ensure_ascii=False),
        status=response.status,
        headers=response.headers,
        mimetype="application/json",
    )
