"""Every backend's sender keeps the written contract (producers.sender.Sender) the producer process relies on:
each of its members, each method taking the contract's parameters."""
import importlib
import inspect
import re

import pytest

from harness.backends import SPECS
from harness.producers.sender import Sender

METHODS = ("from_job", "send_many", "service", "outstanding", "abandon", "close")


def params(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]


# every sender a table can name: Event Hubs' follows its protocol (the SDK's, or Kafka's through the endpoint)
SENDERS = sorted({SPECS[kind].model_construct(**extra).sender for kind in SPECS
                  for extra in ({}, {"protocol": "kafka"})})


def test_both_event_hubs_protocols_name_a_sender():
    assert len(SENDERS) == 2 and {s.rsplit(":", 1)[1] for s in SENDERS} == {"EventHubsSender", "KafkaSender"}


@pytest.mark.parametrize("sender", SENDERS)
def test_each_backends_sender_implements_the_contract(sender):
    module, _, name = sender.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls.name, str)
    for method in METHODS:
        assert params(getattr(cls, method)) == params(getattr(Sender, method)), f"{cls.__name__}.{method}"


def test_the_contract_lists_every_member_the_producer_process_calls():
    from pathlib import Path

    text = (Path(inspect.getfile(Sender)).parent / "process.py").read_text()
    called = set(re.findall(r"sender\.(\w+)", text))
    assert called and called <= set(METHODS) | {"name"}, called - set(METHODS)
