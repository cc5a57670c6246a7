"""The Google Cloud SDK's Pub/Sub emulator, and the topic/subscription wiring memrepo uses.

The emulator is started through its launcher script
``<sdk_root>/platform/pubsub-emulator/bin/cloud-pubsub-emulator``, which ``exec``-s ``java``: the
launcher's PID is the java PID. (Going through ``gcloud beta emulators pubsub start`` would leave
java running when gcloud is killed.)

Clients talk to the emulator over an insecure gRPC channel passed in as the transport, so nothing
here has to set ``PUBSUB_EMULATOR_HOST`` in ``os.environ``. ``google.cloud`` is imported lazily.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from memrepo.devstack.processes import (
    DevStackError,
    ManagedProcess,
    free_port,
    spawn,
    stop_process,
    wait_for_http,
)

__all__ = [
    "DEFAULT_SDK_ROOT",
    "PubSubEmulator",
    "PubSubWiring",
    "ReceivedMessage",
    "create_push_subscription",
    "create_topic",
    "emulator_launcher",
    "publish",
    "pubsub_clients",
    "pull",
    "sdk_root",
    "wire_session_ended",
]

DEFAULT_SDK_ROOT = Path("/usr/lib/google-cloud-sdk")
"""Where the Debian package ``google-cloud-cli`` installs the SDK."""

_LAUNCHER = Path("platform/pubsub-emulator/bin/cloud-pubsub-emulator")


@functools.cache
def sdk_root() -> Path:
    """Return the Google Cloud SDK root, computed once per process.

    First the ``gcloud`` on ``PATH`` with its symlinks resolved (``<root>/bin/gcloud``; instant),
    if the emulator launcher is under that root; then ``gcloud info
    --format='value(installation.sdk_root)'`` (about 2.5 s); then :data:`DEFAULT_SDK_ROOT`.
    """
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        return DEFAULT_SDK_ROOT
    guess = Path(gcloud).resolve().parent.parent
    if (guess / _LAUNCHER).is_file():
        return guess
    try:
        out = subprocess.run(
            [gcloud, "info", "--format=value(installation.sdk_root)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return Path(out) if out and Path(out).is_dir() else DEFAULT_SDK_ROOT


def emulator_launcher(root: Path | None = None) -> Path:
    """Return the path of the ``cloud-pubsub-emulator`` launcher script.

    Args:
        root: SDK root; None asks :func:`sdk_root`.

    Raises:
        DevStackError: If the launcher is not installed (Debian package
            ``google-cloud-cli-pubsub-emulator``).
    """
    path = (root or sdk_root()) / _LAUNCHER
    if not path.is_file():
        raise DevStackError(
            f"Pub/Sub emulator launcher not found at {path}; "
            "install the package google-cloud-cli-pubsub-emulator"
        )
    return path


class PubSubEmulator:
    """The Pub/Sub emulator as a child process on ``127.0.0.1``.

    Use :meth:`spawn` then :meth:`wait_ready` (so several servers can boot in parallel), or
    :meth:`start` for both, or the instance as a context manager. Startup takes about 4 s.

    Attributes:
        host: Interface the emulator binds (always ``127.0.0.1`` here).
        port: TCP port of its gRPC and HTTP endpoint.
        process: The running process after :meth:`spawn`, else None.
    """

    def __init__(self, *, port: int | None = None, log_path: Path | None = None) -> None:
        """Prepare (do not start) an emulator.

        Args:
            port: TCP port; None picks a free one.
            log_path: File for the emulator's output; None discards it.
        """
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.log_path = log_path
        self.process: ManagedProcess | None = None

    @property
    def emulator_host(self) -> str:
        """``host:port``, the value for ``PUBSUB_EMULATOR_HOST``."""
        return f"{self.host}:{self.port}"

    def spawn(self) -> ManagedProcess:
        """Start the emulator process without waiting for it."""
        argv = [str(emulator_launcher()), f"--host={self.host}", f"--port={self.port}"]
        self.process = spawn("pubsub-emulator", argv, log_path=self.log_path)
        return self.process

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until ``GET http://host:port/`` answers 200 ``Ok``.

        Args:
            timeout: Limit in seconds.

        Raises:
            ProcessStartError: If the emulator exits or is not ready in time.
        """
        wait_for_http(
            f"http://{self.emulator_host}/",
            timeout=timeout,
            process=self.process,
            expect_body=b"Ok",
        )

    def start(self, timeout: float = 60.0) -> PubSubEmulator:
        """Spawn the emulator and wait until it is ready (see :meth:`wait_ready`)."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the emulator's process group (the JVM included); a no-op if not running."""
        if self.process is not None:
            stop_process(self.process, timeout=timeout)
            self.process = None

    def __enter__(self) -> PubSubEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def pubsub_clients(emulator_host: str) -> Iterator[tuple[Any, Any]]:
    """Yield a ``(PublisherClient, SubscriberClient)`` pair bound to the emulator.

    Each client gets its own insecure gRPC channel (the emulator speaks plaintext), so no
    credentials and no ``PUBSUB_EMULATOR_HOST`` variable are needed. Both are closed on exit.

    Args:
        emulator_host: ``host:port`` of the emulator.
    """
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    pub_channel = grpc.insecure_channel(emulator_host)
    sub_channel = grpc.insecure_channel(emulator_host)
    publisher = pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=pub_channel))
    subscriber = pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=sub_channel))
    try:
        yield publisher, subscriber
    finally:
        publisher.stop()
        subscriber.close()
        pub_channel.close()


def create_topic(publisher: Any, topic_path: str) -> str:
    """Create ``topic_path`` (``projects/P/topics/T``) unless it exists; return it."""
    from google.api_core import exceptions

    with contextlib.suppress(exceptions.AlreadyExists):
        publisher.create_topic(request={"name": topic_path})
    return topic_path


def create_push_subscription(
    subscriber: Any,
    *,
    subscription_path: str,
    topic_path: str,
    push_endpoint: str | None,
    ack_deadline_seconds: int = 120,
    min_backoff_seconds: float = 1.0,
    max_backoff_seconds: float = 10.0,
    dead_letter_topic_path: str | None = None,
    max_delivery_attempts: int = 5,
) -> str:
    """Create a subscription (push if ``push_endpoint`` is given, else pull); return its path.

    Args:
        subscriber: A ``SubscriberClient`` (see :func:`pubsub_clients`).
        subscription_path: ``projects/P/subscriptions/S``.
        topic_path: ``projects/P/topics/T`` to subscribe to.
        push_endpoint: URL that receives ``POST {"message": ..., "subscription": ...}``.
        ack_deadline_seconds: Seconds a delivery may take before it is retried (10..600).
        min_backoff_seconds: First retry delay in seconds after a nack or failed push.
        max_backoff_seconds: Longest retry delay in seconds.
        dead_letter_topic_path: Topic receiving messages after ``max_delivery_attempts``
            failed deliveries; None disables dead-lettering.
        max_delivery_attempts: Deliveries before dead-lettering (5..100).

    Raises:
        google.api_core.exceptions.AlreadyExists: If the subscription exists.
    """
    request: dict[str, Any] = {
        "name": subscription_path,
        "topic": topic_path,
        "ack_deadline_seconds": ack_deadline_seconds,
        "retry_policy": {
            "minimum_backoff": timedelta(seconds=min_backoff_seconds),
            "maximum_backoff": timedelta(seconds=max_backoff_seconds),
        },
    }
    if push_endpoint:
        request["push_config"] = {"push_endpoint": push_endpoint}
    if dead_letter_topic_path:
        request["dead_letter_policy"] = {
            "dead_letter_topic": dead_letter_topic_path,
            "max_delivery_attempts": max_delivery_attempts,
        }
    subscriber.create_subscription(request=request)
    return subscription_path


@dataclass(frozen=True)
class PubSubWiring:
    """Resource paths created by :func:`wire_session_ended`.

    Attributes:
        topic: ``projects/P/topics/session-ended``.
        dead_letter_topic: ``projects/P/topics/session-ended-dead-letter``.
        dead_letter_subscription: Pull subscription on the dead-letter topic.
        push_subscription: The writer's push subscription, or None when no endpoint was given.
    """

    topic: str
    dead_letter_topic: str
    dead_letter_subscription: str
    push_subscription: str | None


def wire_session_ended(
    emulator_host: str,
    project: str,
    *,
    push_endpoint: str | None = None,
    topic: str = "session-ended",
    dead_letter_topic: str = "session-ended-dead-letter",
    dead_letter_subscription: str = "session-ended-dead-letter-pull",
    push_subscription: str = "writer-push",
    ack_deadline_seconds: int = 120,
    min_backoff_seconds: float = 1.0,
    max_backoff_seconds: float = 10.0,
    max_delivery_attempts: int = 5,
) -> PubSubWiring:
    """Create the writer's topic, dead-letter topic and subscriptions on the emulator.

    Args:
        emulator_host: ``host:port`` of the emulator.
        project: Project id used in every resource path.
        push_endpoint: Writer URL for the push subscription; None creates no push subscription.
        topic: Topic id of session-ended events.
        dead_letter_topic: Topic id receiving undeliverable events.
        dead_letter_subscription: Pull subscription id on the dead-letter topic (for tests).
        push_subscription: Push subscription id.
        ack_deadline_seconds: See :func:`create_push_subscription`.
        min_backoff_seconds: See :func:`create_push_subscription`.
        max_backoff_seconds: See :func:`create_push_subscription`.
        max_delivery_attempts: See :func:`create_push_subscription`.

    Returns:
        The full paths of what was created.
    """
    with pubsub_clients(emulator_host) as (publisher, subscriber):
        topic_path = create_topic(publisher, publisher.topic_path(project, topic))
        dl_topic_path = create_topic(publisher, publisher.topic_path(project, dead_letter_topic))
        dl_sub_path = create_push_subscription(
            subscriber,
            subscription_path=subscriber.subscription_path(project, dead_letter_subscription),
            topic_path=dl_topic_path,
            push_endpoint=None,
            ack_deadline_seconds=60,
        )
        push_path = None
        if push_endpoint:
            push_path = create_push_subscription(
                subscriber,
                subscription_path=subscriber.subscription_path(project, push_subscription),
                topic_path=topic_path,
                push_endpoint=push_endpoint,
                ack_deadline_seconds=ack_deadline_seconds,
                min_backoff_seconds=min_backoff_seconds,
                max_backoff_seconds=max_backoff_seconds,
                dead_letter_topic_path=dl_topic_path,
                max_delivery_attempts=max_delivery_attempts,
            )
    return PubSubWiring(topic_path, dl_topic_path, dl_sub_path, push_path)


def publish(
    emulator_host: str,
    topic_path: str,
    data: bytes,
    *,
    attributes: Mapping[str, str] | None = None,
    ordering_key: str = "",
    timeout: float = 30.0,
) -> str:
    """Publish one message and wait for its server-assigned id.

    Args:
        emulator_host: ``host:port`` of the emulator.
        topic_path: ``projects/P/topics/T``.
        data: Message payload (bytes; push deliveries carry it base64-encoded).
        attributes: Message attributes (string to string).
        ordering_key: Ordering key, '' for none.
        timeout: Seconds to wait for the publish to be acknowledged.

    Returns:
        The message id.
    """
    with pubsub_clients(emulator_host) as (publisher, _):
        kwargs: dict[str, Any] = dict(attributes or {})
        if ordering_key:
            kwargs["ordering_key"] = ordering_key
        message_id: str = publisher.publish(topic_path, data, **kwargs).result(timeout=timeout)
        return message_id


@dataclass(frozen=True)
class ReceivedMessage:
    """A message pulled (and acknowledged) by :func:`pull`.

    Attributes:
        message_id: Server-assigned id.
        data: Decoded payload bytes.
        attributes: Message attributes; dead-lettered messages gain
            ``CloudPubSubDeadLetterSource*`` entries on real Pub/Sub.
        delivery_attempt: Attempt count reported by the server (0 if not reported).
    """

    message_id: str
    data: bytes
    attributes: dict[str, str]
    delivery_attempt: int


def pull(
    emulator_host: str,
    subscription_path: str,
    *,
    max_messages: int = 10,
    timeout: float = 10.0,
    min_messages: int = 1,
) -> list[ReceivedMessage]:
    """Pull and acknowledge messages until ``min_messages`` arrived or ``timeout`` seconds passed.

    Args:
        emulator_host: ``host:port`` of the emulator.
        subscription_path: ``projects/P/subscriptions/S`` (a pull subscription).
        max_messages: Most messages to return.
        timeout: Seconds to keep pulling.
        min_messages: Return as soon as this many messages were received.

    Returns:
        The messages received, possibly fewer than ``min_messages`` (or none) on timeout.
    """
    from google.api_core import exceptions

    received: list[ReceivedMessage] = []
    deadline = time.monotonic() + timeout
    with pubsub_clients(emulator_host) as (_, subscriber):
        while len(received) < min_messages:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                response = subscriber.pull(
                    request={
                        "subscription": subscription_path,
                        "max_messages": max_messages - len(received),
                    },
                    timeout=max(1.0, min(remaining, 5.0)),
                )
            except (exceptions.DeadlineExceeded, exceptions.RetryError):
                continue
            if not response.received_messages:
                time.sleep(0.2)
                continue
            subscriber.acknowledge(
                request={
                    "subscription": subscription_path,
                    "ack_ids": [m.ack_id for m in response.received_messages],
                }
            )
            received.extend(
                ReceivedMessage(
                    message_id=m.message.message_id,
                    data=bytes(m.message.data),
                    attributes=dict(m.message.attributes),
                    delivery_attempt=m.delivery_attempt,
                )
                for m in response.received_messages
            )
    return received
