"""The ``memrepo`` command line (typer). Every command reads ``MEMREPO_STORE``.

Commands: ``ingest`` (replay a LoCoMo conversation, directly or through Pub/Sub), ``context``
(print the context for a message), ``log`` (a user's history with trailers).
"""

from __future__ import annotations

import json
import os
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from memrepo import bootstrap, locomo
from memrepo.errors import MemrepoError
from memrepo.gitcli import git_text
from memrepo.settings import Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


class Via(StrEnum):
    """How ``ingest`` delivers sessions."""

    direct = "direct"
    pubsub = "pubsub"


def _settings() -> Settings:
    return Settings.from_env(os.environ)


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@app.command()
def ingest(
    locomo_path: Annotated[Path, typer.Option("--locomo", help="LoCoMo JSON file")],
    conversation: Annotated[str, typer.Option(help="sample_id, e.g. conv-26")],
    user: Annotated[str, typer.Option(help="user id to write to")],
    via: Annotated[Via, typer.Option(help="direct, or publish to Pub/Sub and wait")] = Via.direct,
    topic: Annotated[str, typer.Option(envvar="MEMREPO_TOPIC", help="projects/P/topics/T")] = "",
    wait_s: Annotated[
        float, typer.Option(help="with --via pubsub: seconds to wait for commits")
    ] = 300.0,
) -> None:
    """Replay one LoCoMo conversation, one session-end event per session, dated from the data."""
    from rich.progress import Progress

    items = [i for i in locomo.load(locomo_path) if i.get("sample_id") == conversation]
    if not items:
        _fail(ValueError(f"no conversation {conversation!r} in {locomo_path}"))
    try:
        conv = locomo.conversation(items[0], user)
    except MemrepoError as exc:
        _fail(exc)
    settings = _settings()
    with Progress() as progress:
        if via is Via.direct:
            task = progress.add_task(f"writing {conversation}", total=len(conv.events))
            writer = bootstrap.writer(settings)
            for event in conv.events:
                writer.write(event)
                progress.advance(task)
        else:
            from memrepo.adapters.pubsub import SessionPublisher

            if not topic:
                _fail(ValueError("--via pubsub needs --topic or MEMREPO_TOPIC"))
            SessionPublisher(topic).publish_all(list(conv.events))
            task = progress.add_task(
                f"waiting for {len(conv.events)} commits", total=len(conv.events)
            )
            wanted = {e.session_id for e in conv.events}
            deadline = time.monotonic() + wait_s
            done = 0
            while done < len(wanted):
                done = len(wanted & _committed_sessions(settings, user))
                progress.update(task, completed=done)
                if done < len(wanted):
                    if time.monotonic() > deadline:
                        _fail(
                            TimeoutError(
                                f"only {done}/{len(wanted)} sessions committed after {wait_s:.0f} s"
                            )
                        )
                    time.sleep(0.5)
    typer.echo(f"{len(conv.events)} sessions of {conversation} in memory of {user}")


def _committed_sessions(settings: Settings, user: str) -> set[str]:
    repos = bootstrap.repos(settings)
    if repos.store.get(repos.key(user)) is None:
        return set()
    ws, _ = repos.checkout(user)
    with ws:
        out = git_text(["log", "--format=%(trailers:key=Session-Id,valueonly)", ws.branch], ws.path)
    return {line.strip() for line in out.splitlines() if line.strip()}


@app.command()
def context(
    user: str,
    text: str,
    max_tokens: Annotated[int, typer.Option("--max-tokens")] = 2000,
    as_json: Annotated[bool, typer.Option("--json", help="print the response JSON")] = False,
) -> None:
    """Print the context for one user message."""
    try:
        result = bootstrap.retriever(_settings()).context(
            user, [{"role": "user", "content": text}], max_tokens
        )
    except MemrepoError as exc:
        _fail(exc)
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        typer.echo(result.text or "(no memory matched)")
        typer.secho(
            f"-- {result.tokens_used} tokens, {len(result.blocks)} blocks, engine {result.engine}, "
            f"{result.elapsed_ms:.0f} ms",
            err=True,
            fg=typer.colors.BLUE,
        )


@app.command()
def log(user: str, limit: Annotated[int, typer.Option("-n")] = 0) -> None:
    """Print the user's git log with the trailers of every commit."""
    try:
        repos = bootstrap.repos(_settings())
        if repos.store.get(repos.key(user)) is None:
            _fail(ValueError(f"user {user!r} has no memory in {repos.store.url}"))
        ws, _ = repos.checkout(user)
        with ws:
            args = ["log", "--format=commit %H%nDate:   %ad%n%n%w(0,4,4)%B", ws.branch]
            if limit:
                args.insert(1, f"-{limit}")
            sys.stdout.write(git_text(args, ws.path))
    except MemrepoError as exc:
        _fail(exc)


def main() -> None:
    """Run the CLI."""
    app()


if __name__ == "__main__":
    main()
