"""The ``memrepo`` command line (typer). Every command reads ``MEMREPO_STORE``.

Commands: ``ingest`` (replay a LoCoMo conversation, directly or through Pub/Sub), ``context``
(print the context for a message), ``log`` (a user's history with trailers); operating memories
like code: ``revert``, ``rebuild``, ``mirror``, ``onboard``, ``show``, ``blame``, ``export``,
``delete`` (``--json`` where a script reads the output), ``run`` (one command
through the retrieval agent's sandbox, printed exactly as the agent would see it).
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
from memrepo.evaluation.locomo_eval import eval_app
from memrepo.gitcli import git_text
from memrepo.settings import Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
app.add_typer(eval_app, name="eval")


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


@app.command("run")
def run_command(user: str, command: str) -> None:
    """Run COMMAND through the retrieval agent's sandbox on USER's memory and print what the agent
    would read (status line and framed output, refusals included). Exits 126 when refused, else
    with the command's own exit status."""
    from memrepo.retrieval.run_tool import RunTool

    try:
        ws, _ = bootstrap.repos(_settings()).checkout(user)
        with ws:
            if ws.head() is None:
                _fail(ValueError(f"user {user!r} has no memory"))
            done = RunTool(ws.path).run(command)
    except MemrepoError as exc:
        _fail(exc)
    typer.echo(done.text)
    if done.result.refused:
        raise typer.Exit(126)
    if done.result.exit_code != 0:
        raise typer.Exit(done.result.exit_code)


def _emit(data: object) -> None:
    typer.echo(json.dumps(data, ensure_ascii=False, default=str))


@app.command()
def revert(
    user: str,
    session_id: str,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Undo one session as a new commit (refused if later sessions changed the same lines)."""
    from dataclasses import asdict

    from memrepo.operations.revert import revert as revert_session

    try:
        result = revert_session(bootstrap.changer(_settings()), user, session_id)
    except MemrepoError as exc:
        _fail(exc)
    if as_json:
        _emit(asdict(result))
    else:
        typer.echo(f"{result.status}: session {session_id} ({result.reverted_commit[:12]}) "
                   f"by {result.commit[:12]}; {len(result.changed)} files changed")


@app.command()
def rebuild(
    user: str,
    checkpoint_every: Annotated[int, typer.Option(help="checkpoint every N sessions")] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines: progress, result")] = False,
) -> None:
    """Replay the user's transcripts with the current writer onto a new history (resumable)."""
    from dataclasses import asdict

    from rich.progress import Progress

    from memrepo.operations.rebuild import Progress as Step

    rebuilder = bootstrap.rebuilder(_settings(), checkpoint_every=checkpoint_every)
    try:
        if as_json:
            result = rebuilder.rebuild(user, on_progress=lambda p: _emit({"progress": asdict(p)}))
        else:
            with Progress() as bar:
                task = bar.add_task(f"rebuilding {user}", total=None)

                def show(step: Step) -> None:
                    bar.update(task, completed=step.done, total=step.total,
                               description=f"rebuilding {user} ({step.stage})")

                result = rebuilder.rebuild(user, on_progress=show)
    except MemrepoError as exc:
        _fail(exc)
    if as_json:
        _emit({"result": asdict(result)})
    else:
        typer.echo(f"rebuilt {user}: {result.sessions} sessions ({result.resumed_from} resumed), "
                   f"{result.commit[:12]} replaces {result.replaced[:12]} "
                   f"in {result.elapsed_s:.1f} s")


@app.command()
def mirror(
    user: str,
    force: Annotated[bool, typer.Option(help="overwrite a remote branch that diverged")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Push the user's branch to the mirror of MEMREPO_MIRROR_URL now."""
    from dataclasses import asdict

    settings = _settings()
    try:
        target = bootstrap.mirror(settings)
        if target is None:
            raise ValueError("no mirror configured: set MEMREPO_MIRROR_URL")
        ws, _ = bootstrap.repos(settings).checkout(user)
        with ws:
            if ws.head() is None:
                raise ValueError(f"user {user!r} has no memory")
            result = target.push(ws, force=force)
    except (MemrepoError, ValueError) as exc:
        _fail(exc)
    if as_json:
        _emit(asdict(result))
    else:
        typer.echo(f"{result.status}: {result.ref} {result.commit[:12]} -> {result.remote}")


@app.command()
def onboard(
    user: str,
    profile: Annotated[str, typer.Option(help="a few lines about the user")] = "",
    file: Annotated[Path | None, typer.Option(help="a profile template file")] = None,
    name: Annotated[str, typer.Option(help="the user's name")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Create the user's memory from a profile before the first session (no-op if it exists)."""
    from dataclasses import asdict

    from memrepo.operations.onboard import onboard as onboard_user

    try:
        if bool(profile) == (file is not None):
            raise ValueError("give exactly one of --profile TEXT or --file F")
        text = profile or (file.read_text(encoding="utf-8") if file else "")
        result = onboard_user(bootstrap.changer(_settings()), user, text, name=name or None)
    except (MemrepoError, ValueError, OSError) as exc:
        _fail(exc)
    if as_json:
        _emit(asdict(result))
    else:
        typer.echo(f"{result.status}: {user} ({result.entries} profile entries)")


@app.command()
def show(
    user: str,
    path: Annotated[str, typer.Argument(help="a file; omit to list the files")] = "",
    rev: Annotated[str, typer.Option(help="a revision, e.g. HEAD~3")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print a file of the user's memory, or list its files."""
    from memrepo.operations import inspect

    try:
        repos = bootstrap.repos(_settings())
        if not path:
            files = inspect.list_files(repos, user)
            typer.echo(json.dumps({"files": files}) if as_json else "\n".join(files))
            return
        text = inspect.read_file(repos, user, path, rev or None)
    except (MemrepoError, ValueError) as exc:
        _fail(exc)
    if as_json:
        _emit({"path": path, "text": text})
    else:
        sys.stdout.write(text)


@app.command()
def blame(
    user: str,
    path: str,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON lines")] = False,
) -> None:
    """Print each line of a file with the session that last changed it."""
    from dataclasses import asdict

    from memrepo.operations import inspect

    try:
        rows = inspect.blame(bootstrap.repos(_settings()), user, path)
    except (MemrepoError, ValueError) as exc:
        _fail(exc)
    for row in rows:
        if as_json:
            _emit(asdict(row))
        else:
            label = row.session_id or row.commit[:12]
            typer.echo(f"{label[:24]:<24} {row.date[:10]} {row.line:>4}| {row.text}")


@app.command()
def export(user: str, file: Path) -> None:
    """Write the user's memory as a git bundle to FILE (``git clone -b user/USER FILE``)."""
    try:
        data = bootstrap.repos(_settings()).export(user)
        if data is None:
            raise ValueError(f"user {user!r} has no memory")
        file.write_bytes(data)
        typer.echo(f"wrote {len(data)} bytes to {file}")
    except (MemrepoError, ValueError, OSError) as exc:
        _fail(exc)


@app.command()
def delete(
    user: str,
    yes: Annotated[bool, typer.Option("--yes", help="confirm: this cannot be undone")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Delete every object of the user's memory (all versions). Needs --yes."""
    if not yes:
        _fail(ValueError(f"deleting {user}'s memory cannot be undone; add --yes"))
    try:
        count = bootstrap.repos(_settings()).delete(user)
    except MemrepoError as exc:
        _fail(exc)
    if as_json:
        _emit({"user_id": user, "deleted_objects": count})
    else:
        typer.echo(f"deleted {count} objects of {user}")


def main() -> None:
    """Run the CLI; a bad input or setting ends with one ``error:`` line and exit status 2.

    Errors of the user's making (memrepo's permanent and transient errors, invalid settings or
    files, which pydantic and the loaders raise as ``ValueError``, and ``OSError``) are reported in
    one line; anything else is a bug and keeps its traceback.
    """
    try:
        app()
    except (MemrepoError, ValueError, OSError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from exc


if __name__ == "__main__":
    main()
