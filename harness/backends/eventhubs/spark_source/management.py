"""Management calls (hub and partition properties) over one AMQP connection kept open per client, instead of the
SDK's new connection per call.

Why: azure-eventhub 5 opens a new connection for every get_eventhub_properties / get_partition_properties and polls
its handshake with a 50 ms sleep per frame it reads (AMQP header, open, begin, the two $cbs attaches, the credit,
the token's answer): ~0.36 s per call on loopback whatever the server does (measured with the SDK's frame trace
against the emulator: 7 reads, 50 ms apart; the $management request itself then takes ~2 ms). The driver asks every
batch, so every batch paid it. The Java SDK under azure-eventhubs-spark keeps its management link open on the
client's connection; `PersistentManagementClient` does the same with the Python SDK's own pieces: its auth, its
AMQP management client, its request messages and its response parsing (the public get_*_properties run unchanged;
only the transport step, `_management_request`, keeps its connection instead of closing it).

Nothing is cached: every call is a request to the service, answered with what the hub holds at that moment, so a
latestOffset sees every event enqueued before it asked. Anything unexpected (the connection dropped or idled out,
a status >= 400, a transport this does not know) hands the same request to the SDK's own path, with its retries
and error mapping, so errors read exactly as without this; a connection that failed to open is not retried for
REOPEN_AFTER_S (the SDK's path answers meanwhile).
"""
from __future__ import annotations

import logging
import threading
import time

from azure.eventhub import EventHubConsumerClient

try:  # the SDK's internals this reuses (azure-eventhub 5.15); an SDK without them: every call takes its own path
    from azure.eventhub._constants import MGMT_STATUS_CODE, MGMT_STATUS_DESC, READ_OPERATION
    from azure.eventhub._transport._pyamqp_transport import PyamqpTransport
except ImportError:  # pragma: no cover - depends on the installed SDK
    PyamqpTransport = None

LOG = logging.getLogger("harness.backends.eventhubs.spark_source")

OPEN_TIMEOUT_S = 30.0  # opening the connection (the SDK's handshake, ~0.36 s on loopback)
REQUEST_TIMEOUT_S = 30.0  # one request on the open connection (~2 ms on loopback)
REOPEN_AFTER_S = 5.0  # after a failure to open, the SDK's own path answers for this long before trying again


class PersistentManagementClient(EventHubConsumerClient):
    """An EventHubConsumerClient whose management calls share one open connection (see the module). Receiving is
    the SDK's, untouched. Thread-safe: requests on the kept connection take turns (each ~2 ms); a request that
    falls back to the SDK's path runs on its own connection, outside the lock."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._kept = None  # the SDK's AMQP management client, open and authenticated
        self._kept_auth = None
        self._kept_lock = threading.Lock()
        self._kept_failed_at: float | None = None
        self.kept_requests = 0  # answered on the kept connection (diagnostics, tests)
        self.fallback_requests = 0  # answered by the SDK's own path

    def _management_request(self, mgmt_msg, op_type):  # the SDK's hook: one request, returns the response
        response = self._kept_request(mgmt_msg, op_type)
        if response is not None:
            self.kept_requests += 1
            return response
        self.fallback_requests += 1
        return super()._management_request(mgmt_msg, op_type)

    def _kept_request(self, mgmt_msg, op_type):
        """The response over the kept connection, or None when the SDK's own path should answer instead."""
        if PyamqpTransport is None or self._amqp_transport is not PyamqpTransport:
            return None  # uamqp_transport=True (its client differs) or another SDK: the SDK's path as is
        with self._kept_lock:
            if self._kept is None:
                if self._kept_failed_at is not None and time.monotonic() - self._kept_failed_at < REOPEN_AFTER_S:
                    return None
                try:
                    self._open_kept()
                except Exception as exc:  # noqa: BLE001 - the SDK's path answers and reports its own errors
                    LOG.debug("could not open a kept management connection: %r", exc)
                    self._kept_failed_at = time.monotonic()
                    self._close_kept()
                    return None
            try:
                mgmt_msg.application_properties["security_token"] = (
                    self._amqp_transport.get_updated_token(self._kept_auth))
                status, _description, response = self._amqp_transport.mgmt_client_request(
                    self._kept, mgmt_msg, operation=READ_OPERATION, operation_type=op_type,
                    status_code_field=MGMT_STATUS_CODE, description_fields=MGMT_STATUS_DESC,
                    timeout=REQUEST_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - dropped, idled out, timed out: reopen next time
                LOG.debug("kept management connection failed, the SDK's path answers: %r", exc)
                self._close_kept()
                return None
            if int(status) >= 400:
                return None  # the SDK's path asks again and raises its own error for it
            return response

    def _open_kept(self) -> None:
        """The SDK's own management client and auth (as in its `_management_request`), opened once."""
        auth = self._create_auth()
        client = self._amqp_transport.create_mgmt_client(self._address, mgmt_auth=auth, config=self._config)
        self._kept, self._kept_auth = client, auth
        client.open()
        deadline = time.monotonic() + OPEN_TIMEOUT_S
        while not client.client_ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the management connection was not ready within {OPEN_TIMEOUT_S:g} s")
            time.sleep(0.05)  # the SDK's own poll interval while its handshake runs
        self._kept_failed_at = None

    def _close_kept(self) -> None:
        client, self._kept, self._kept_auth = self._kept, None, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a broken connection is best effort
                pass

    def close(self) -> None:
        with self._kept_lock:
            self._close_kept()
        super().close()
