"""The manifest protocol and the warm cache on Cloud Storage (fake-gcs-server, which enforces
``if_generation_match`` with 412), with the same tests as ``test_manifest_protocol.py``.

Marked ``stack``: starts the local stack (without functions) once per module.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from helpers import running_stack
from memrepo.adapters.gcs import GCSStore
from memrepo.devstack.stack import Stack
from test_manifest_protocol import (  # noqa: F401 - collected here with this module's new_store
    caches,
    test_a_manifest_write_that_landed_before_its_retry_counts,
    test_cache_is_never_stale_after_another_instance_wrote,
    test_concurrent_writers_lose_nothing,
    test_crash_at_each_step_keeps_every_session,
    test_export_is_one_bundle_git_can_clone,
    test_gc_spares_the_parts_of_a_write_in_flight,
    test_lean_writer_workspace_keeps_transcripts_in_the_index,
    test_legacy_bundle_is_read_then_migrated,
    test_reader_sees_the_old_or_the_new_state_never_a_mix,
    test_tampered_part_is_refused,
    test_the_same_session_delivered_twice_at_once,
    test_writes_grow_a_chain_then_compact_into_a_base,
)
from test_store_contract import contract

pytestmark = pytest.mark.stack
_prefixes = itertools.count()


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running_stack() as running:
        yield running


@pytest.fixture
def new_store(stack: Stack):
    client = stack.storage_client()
    return lambda: GCSStore(stack.bucket, f"manifest-{next(_prefixes)}", client=client)


def test_store_contract_on_fake_gcs_server(new_store):
    contract(new_store())
