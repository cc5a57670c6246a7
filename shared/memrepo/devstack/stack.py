"""The whole offline cloud: Pub/Sub emulator, fake-gcs-server and, optionally, both functions.

All servers are spawned first and awaited afterwards, so startup costs about as long as the
slowest one (the Pub/Sub emulator's JVM, about 4 s). Then the bucket is created and the
session-ended topic is wired: dead-letter topic, a pull subscription on it, and (when the writer
runs) the ``writer-push`` subscription pushing to the writer.

The writer's push endpoint is ``<writer_url>/projects/<project>/topics/<topic>``: functions-
framework takes the topic from that path, so the CloudEvent's source is
``//pubsub.googleapis.com/projects/<project>/topics/<topic>``, as with an Eventarc trigger.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from memrepo.devstack.functions import FunctionServer, FunctionSpec
from memrepo.devstack.gcs_emulator import FakeGcsServer, storage_client
from memrepo.devstack.processes import ManagedProcess, ProcessStopError
from memrepo.devstack.pubsub_emulator import (
    PubSubEmulator,
    PubSubWiring,
    ReceivedMessage,
    create_push_subscription,
    create_topic,
    publish,
    pubsub_clients,
    pull,
    wire_session_ended,
)

__all__ = ["Stack"]

WRITER_TARGET = "on_session_ended"
RETRIEVAL_TARGET = "get_context"


def _as_spec(
    value: FunctionSpec | Path | str | None, target: str, kind: str
) -> FunctionSpec | None:
    """Turn a source path into a :class:`FunctionSpec` with the default target and type."""
    if value is None or isinstance(value, FunctionSpec):
        return value
    return FunctionSpec(target=target, source=Path(value), signature_type=kind)  # type: ignore[arg-type]


class Stack:
    """Context manager running the local cloud on ``127.0.0.1``; everything stops on exit.

    Example::

        with Stack(writer=Path("functions/writer"), retrieval=Path("functions/retrieval")) as s:
            s.publish(b'{"session_id": "..."}')
            requests.post(s.retrieval_url, json=...)

    Attributes:
        project: Project id of every Pub/Sub resource and of the bucket.
        topic: Topic id of session-ended events (also ``dead_letter_topic``,
            ``dead_letter_subscription``, ``push_subscription``: see ``__init__``).
        policy: Subscription settings (ack deadline, backoff, max delivery attempts).
        bucket: Bucket created on fake-gcs-server.
        prefix: Object prefix inside the bucket (``MEMREPO_STORE=gs://bucket/prefix``).
        pubsub: The emulator (after :meth:`start`).
        gcs: fake-gcs-server (after :meth:`start`).
        writer: The writer's server, or None when not requested.
        retrieval: The retrieval function's server, or None when not requested.
        wiring: Paths of the topics and subscriptions (after :meth:`start`).
        log_dir: Directory of the servers' log files.
    """

    def __init__(
        self,
        *,
        project: str = "memrepo-local",
        bucket: str = "memrepo-local",
        prefix: str = "users",
        writer: FunctionSpec | Path | str | None = None,
        retrieval: FunctionSpec | Path | str | None = None,
        function_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        bucket_versioning: bool = True,
        topic: str = "session-ended",
        dead_letter_topic: str = "session-ended-dead-letter",
        dead_letter_subscription: str = "session-ended-dead-letter-pull",
        push_subscription: str = "writer-push",
        ack_deadline_seconds: int = 120,
        min_backoff_seconds: float = 1.0,
        max_backoff_seconds: float = 10.0,
        max_delivery_attempts: int = 5,
        startup_timeout: float = 60.0,
    ) -> None:
        """Configure (do not start) a stack.

        Args:
            project: Project id.
            bucket: Bucket name to create.
            prefix: Object prefix for memrepo's bundles.
            writer: Writer function: a spec, or its source dir/file (target
                ``on_session_ended``, signature ``cloudevent``); None runs no writer.
            retrieval: Retrieval function: a spec, or its source dir/file (target
                ``get_context``, signature ``http``); None runs no retrieval function.
            function_env: Extra variables for both functions, on top of :meth:`env`.
            log_dir: Directory for log files (kept); None uses a temporary one removed on stop.
            bucket_versioning: Enable object versioning on the bucket.
            topic: Topic id of session-ended events.
            dead_letter_topic: Topic id of dead letters.
            dead_letter_subscription: Pull subscription id on the dead-letter topic.
            push_subscription: Id of the writer's push subscription.
            ack_deadline_seconds: Ack deadline of push subscriptions, in seconds.
            min_backoff_seconds: Retry policy minimum backoff, in seconds.
            max_backoff_seconds: Retry policy maximum backoff, in seconds.
            max_delivery_attempts: Deliveries before a message is dead-lettered (5..100).
            startup_timeout: Seconds to wait for each server to become ready.
        """
        self.project = project
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self._writer_spec = _as_spec(writer, WRITER_TARGET, "cloudevent")
        self._retrieval_spec = _as_spec(retrieval, RETRIEVAL_TARGET, "http")
        self._function_env = dict(function_env or {})
        self._given_log_dir = log_dir
        self.log_dir: Path | None = None
        self.bucket_versioning = bucket_versioning
        self.topic = topic
        self.dead_letter_topic = dead_letter_topic
        self.dead_letter_subscription = dead_letter_subscription
        self.push_subscription = push_subscription
        self.policy: dict[str, Any] = {
            "ack_deadline_seconds": ack_deadline_seconds,
            "min_backoff_seconds": min_backoff_seconds,
            "max_backoff_seconds": max_backoff_seconds,
            "max_delivery_attempts": max_delivery_attempts,
        }
        self.startup_timeout = startup_timeout
        self.pubsub: PubSubEmulator | None = None
        self.gcs: FakeGcsServer | None = None
        self.writer: FunctionServer | None = None
        self.retrieval: FunctionServer | None = None
        self.wiring: PubSubWiring | None = None
        self.startup_seconds: float | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Stack:
        """Start every server, create the bucket and the Pub/Sub wiring.

        On any failure (or KeyboardInterrupt) whatever was started is stopped again.

        Returns:
            self, with :attr:`startup_seconds` set.

        Raises:
            ProcessStartError: If a server fails to start in time.
            DevStackError: If a binary is missing.
        """
        began = time.monotonic()
        if self._given_log_dir is not None:
            self.log_dir = Path(self._given_log_dir)
            self.log_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.log_dir = Path(tempfile.mkdtemp(prefix="memrepo-devstack-"))
        try:
            self._start_servers()
            self._create_bucket()
            push_endpoint = None
            if self.writer is not None:
                push_endpoint = f"{self.writer.url}/{self.topic_path}"
            assert self.pubsub is not None
            self.wiring = wire_session_ended(
                self.pubsub.emulator_host,
                self.project,
                push_endpoint=push_endpoint,
                topic=self.topic,
                dead_letter_topic=self.dead_letter_topic,
                dead_letter_subscription=self.dead_letter_subscription,
                push_subscription=self.push_subscription,
                **self.policy,
            )
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _start_servers(self) -> None:
        """Spawn all servers, then wait for each (they boot in parallel)."""
        assert self.log_dir is not None
        self.pubsub = PubSubEmulator(log_path=self.log_dir / "pubsub-emulator.log")
        self.gcs = FakeGcsServer(log_path=self.log_dir / "fake-gcs-server.log")
        servers: list[PubSubEmulator | FakeGcsServer | FunctionServer] = [self.pubsub, self.gcs]
        env = {**self.env(), **self._function_env}
        if self._writer_spec is not None:
            spec = replace(self._writer_spec, env={**env, **self._writer_spec.env})
            self.writer = FunctionServer(spec, log_path=self.log_dir / "writer.log", name="writer")
            servers.append(self.writer)
        if self._retrieval_spec is not None:
            spec = replace(self._retrieval_spec, env={**env, **self._retrieval_spec.env})
            self.retrieval = FunctionServer(
                spec, log_path=self.log_dir / "retrieval.log", name="retrieval"
            )
            servers.append(self.retrieval)
        for server in servers:
            server.spawn()
        for server in servers:
            server.wait_ready(self.startup_timeout)

    def _create_bucket(self) -> None:
        """Create :attr:`bucket` on fake-gcs-server (versioned if requested)."""
        client = self.storage_client()
        bucket = client.bucket(self.bucket)
        bucket.versioning_enabled = self.bucket_versioning
        client.create_bucket(bucket)

    def stop(self) -> None:
        """Stop every server (functions first); safe to call twice or after a failed start.

        Raises:
            ProcessStopError: If some process survived SIGKILL (all others are still stopped).
        """
        errors: list[str] = []
        for server in (self.retrieval, self.writer, self.gcs, self.pubsub):
            if server is None:
                continue
            try:
                server.stop()
            except ProcessStopError as exc:
                errors.append(str(exc))
        if self._given_log_dir is None and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None
        if errors:
            raise ProcessStopError("; ".join(errors))

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what clients need ----------------------------------------------------------------------

    @property
    def processes(self) -> list[ManagedProcess]:
        """The running server processes (to record in a state file or check by PID)."""
        servers = (self.pubsub, self.gcs, self.writer, self.retrieval)
        return [s.process for s in servers if s is not None and s.process is not None]

    @property
    def pubsub_host(self) -> str:
        """``127.0.0.1:PORT`` of the Pub/Sub emulator (``PUBSUB_EMULATOR_HOST``)."""
        assert self.pubsub is not None, "stack not started"
        return self.pubsub.emulator_host

    @property
    def gcs_url(self) -> str:
        """``http://127.0.0.1:PORT`` of fake-gcs-server (``STORAGE_EMULATOR_HOST``)."""
        assert self.gcs is not None, "stack not started"
        return self.gcs.url

    @property
    def store_url(self) -> str:
        """``gs://bucket/prefix``, the value of ``MEMREPO_STORE``."""
        return f"gs://{self.bucket}/{self.prefix}" if self.prefix else f"gs://{self.bucket}"

    @property
    def topic_path(self) -> str:
        """``projects/P/topics/session-ended``."""
        return f"projects/{self.project}/topics/{self.topic}"

    @property
    def dead_letter_topic_path(self) -> str:
        """``projects/P/topics/session-ended-dead-letter``."""
        return f"projects/{self.project}/topics/{self.dead_letter_topic}"

    @property
    def dead_letter_subscription_path(self) -> str:
        """Pull subscription on the dead-letter topic."""
        return f"projects/{self.project}/subscriptions/{self.dead_letter_subscription}"

    @property
    def writer_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` of the writer, or None when it does not run."""
        return self.writer.url if self.writer else None

    @property
    def retrieval_url(self) -> str | None:
        """``http://127.0.0.1:PORT`` of the retrieval function, or None when it does not run."""
        return self.retrieval.url if self.retrieval else None

    def env(self) -> dict[str, str]:
        """Return the environment variables a client of this stack needs.

        Keys: ``PUBSUB_EMULATOR_HOST``, ``PUBSUB_PROJECT_ID``, ``STORAGE_EMULATOR_HOST``,
        ``GOOGLE_CLOUD_PROJECT``, ``MEMREPO_STORE``, ``MEMREPO_TOPIC``, plus
        ``MEMREPO_WRITER_URL`` / ``MEMREPO_RETRIEVAL_URL`` when those functions run.
        """
        env = {
            "PUBSUB_EMULATOR_HOST": self.pubsub_host,
            "PUBSUB_PROJECT_ID": self.project,
            "STORAGE_EMULATOR_HOST": self.gcs_url,
            "GOOGLE_CLOUD_PROJECT": self.project,
            "MEMREPO_STORE": self.store_url,
            "MEMREPO_TOPIC": self.topic_path,
        }
        if self.writer_url:
            env["MEMREPO_WRITER_URL"] = self.writer_url
        if self.retrieval_url:
            env["MEMREPO_RETRIEVAL_URL"] = self.retrieval_url
        return env

    # -- helpers for tests and scripts ----------------------------------------------------------

    def storage_client(self) -> Any:
        """Return a ``google.cloud.storage.Client`` bound to fake-gcs-server."""
        return storage_client(self.gcs_url, self.project)

    def publish(
        self,
        data: bytes,
        *,
        topic_path: str | None = None,
        ordering_key: str = "",
        **attributes: str,
    ) -> str:
        """Publish ``data`` with ``attributes`` (default topic: session-ended); return its id."""
        return publish(
            self.pubsub_host,
            topic_path or self.topic_path,
            data,
            attributes=attributes,
            ordering_key=ordering_key,
        )

    def pull_dead_letters(
        self, *, min_messages: int = 1, timeout: float = 10.0
    ) -> list[ReceivedMessage]:
        """Pull and ack dead letters until ``min_messages`` arrived or ``timeout`` s passed."""
        return pull(
            self.pubsub_host,
            self.dead_letter_subscription_path,
            min_messages=min_messages,
            timeout=timeout,
        )

    def create_push_subscription(
        self,
        name: str,
        push_endpoint: str,
        *,
        topic: str | None = None,
        **policy: Any,
    ) -> str:
        """Create a push subscription dead-lettering into this stack's dead-letter topic.

        Args:
            name: Subscription id.
            push_endpoint: URL receiving the pushes.
            topic: Topic id (created if missing); None uses the session-ended topic.
            **policy: Overrides of ``ack_deadline_seconds``, ``min_backoff_seconds``,
                ``max_backoff_seconds``, ``max_delivery_attempts``.

        Returns:
            The subscription path.
        """
        with pubsub_clients(self.pubsub_host) as (publisher, subscriber):
            topic_path = self.topic_path
            if topic is not None:
                topic_path = create_topic(publisher, publisher.topic_path(self.project, topic))
            return create_push_subscription(
                subscriber,
                subscription_path=subscriber.subscription_path(self.project, name),
                topic_path=topic_path,
                push_endpoint=push_endpoint,
                dead_letter_topic_path=self.dead_letter_topic_path,
                **{**self.policy, **policy},
            )
