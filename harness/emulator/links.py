"""Session and link state kept by a connection (the server side of AMQP 1.0 sessions and links).

``InLink``: the client sends on it (producer, ``$cbs``/``$management`` requests); we grant credit and settle.
``OutLink``: we send on it (consumer, ``$cbs``/``$management`` responses); the client grants credit.
"""

from __future__ import annotations

from collections import deque

# What a link is attached to.
KIND_HUB = "hub"
KIND_CBS = "cbs"
KIND_MGMT = "mgmt"

IN_CREDIT = 5000  # credit granted to producers; refilled when half is used
SESSION_WINDOW = 1 << 20  # our incoming window (transfer frames); refreshed when half is used


class Link:
    __slots__ = (
        "session", "name", "handle", "remote_handle", "kind", "source", "target", "detached", "hub",
        "partition_id", "snd_settle_mode", "rcv_settle_mode", "address",
    )

    def __init__(self, session, name, handle, remote_handle, kind, source, target) -> None:
        self.session = session
        self.name = name
        self.handle = handle
        self.remote_handle = remote_handle
        self.kind = kind
        self.source = source
        self.target = target
        self.detached = False  # we sent a detach (waiting for the client's)
        self.hub = None
        self.partition_id: str | None = None
        self.snd_settle_mode = None
        self.rcv_settle_mode = None
        self.address = None

    @property
    def conn(self):
        return self.session.conn


class InLink(Link):
    __slots__ = ("delivery_count", "credit", "partial", "partial_first")

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.delivery_count = 0  # the client's, as we know it
        self.credit = 0
        self.partial: bytearray | None = None  # multi-frame transfer being reassembled
        self.partial_first = None  # the first transfer frame of it


class OutLink(Link):
    __slots__ = (
        "delivery_count", "credit", "drain", "consumer_group", "epoch", "runtime_metric", "next_seq",
        "partition", "pending", "receiver_name",
    )

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.delivery_count = 0  # ours (initial-delivery-count 0)
        self.credit = 0
        self.drain = False
        self.consumer_group: str | None = None
        self.epoch: int | None = None
        self.runtime_metric = False
        self.next_seq = 0
        self.partition = None
        self.pending: deque = deque()  # management/CBS responses waiting for credit
        self.receiver_name: str | None = None  # com.microsoft:receiver-name, named in quota errors


class Session:
    __slots__ = (
        "conn", "channel", "remote_channel", "links", "handles_used", "next_incoming_id", "in_window_left",
        "next_outgoing_id", "remote_in_window", "next_delivery_id", "ended",
    )

    def __init__(self, conn, channel: int, remote_channel: int, remote_next_outgoing_id: int,
                 remote_incoming_window: int) -> None:
        self.conn = conn
        self.channel = channel
        self.remote_channel = remote_channel
        self.links: dict[int, Link] = {}  # by the client's handle
        self.handles_used: set[int] = set()
        self.next_incoming_id = remote_next_outgoing_id or 0
        self.in_window_left = SESSION_WINDOW
        self.next_outgoing_id = 0
        self.remote_in_window = remote_incoming_window or 0
        self.next_delivery_id = 0
        self.ended = False

    def alloc_handle(self) -> int:
        h = 0
        used = self.handles_used
        while h in used:
            h += 1
        used.add(h)
        return h

    def out_links(self):
        return [link for link in self.links.values() if isinstance(link, OutLink) and not link.detached]

    def response_link(self, kind: str) -> OutLink | None:
        for link in self.links.values():
            if isinstance(link, OutLink) and link.kind == kind and not link.detached:
                return link
        return None
