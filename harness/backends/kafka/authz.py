"""May the run's principal apply its faults? Asked of the cluster once the topic exists, before any traffic.

Each fault declares the Kafka topic operations its admin requests need (`Fault.kafka_operations`, e.g. DELETE for
DeleteTopics). The broker says which operations the connecting principal is authorized for on the topic
(DescribeTopics with include_authorized_operations, KIP-430), so no ACL has to be read or interpreted here: the
cluster's own authorizer answers, whatever it is. A fault the principal may not apply refuses the run with exit 2
(an `InputError`) naming the fault, the operation, the request and the principal, so it can never fail
half-applied in the middle of a run. A cluster that does not report authorized operations (no authorizer: every
operation is allowed) passes.
"""
from __future__ import annotations

from confluent_kafka import KafkaException, TopicCollection

from harness.errors import InputError


class AuthorizationRefused(InputError):
    """The configured principal may not do what a scheduled fault needs."""


def authorized_operations(admin, topic: str, timeout: float = 30.0) -> set[str] | None:
    """The operations the admin client's principal may do on `topic` (ACL operation names), or None when the
    broker does not say (no authorizer configured)."""
    futures = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True,
                                    request_timeout=timeout)
    try:
        description = futures[topic].result()
    except KafkaException as exc:
        raise AuthorizationRefused(f"cannot describe topic {topic!r} to check the faults' permissions: "
                                   f"{exc.args[0].str() if exc.args else exc}") from None
    ops = description.authorized_operations
    if ops is None:
        return None
    return {op.name for op in ops}


def refusals(allowed: set[str] | None, topic: str, required: list[tuple[str, dict[str, str]]],
             principal: str) -> list[str]:
    """One sentence per (fault, operation) the principal may not do; [] when everything is allowed."""
    if allowed is None or "ALL" in allowed:
        return []
    out = []
    for label, needs in required:
        for op, request in needs.items():
            if op not in allowed:
                out.append(f"{label} needs {op} on topic {topic!r} ({request}), which {principal} is not allowed")
    return out


def check_authorized(admin, topic: str, required: list[tuple[str, dict[str, str]]], principal: str) -> None:
    problems = refusals(authorized_operations(admin, topic), topic, required, principal)
    if problems:
        raise AuthorizationRefused("refused before any traffic: " + "; ".join(problems)
                                   + " (grant the ACLs, or run the fault with a principal that has them)")
