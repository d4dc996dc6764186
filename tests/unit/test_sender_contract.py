"""Every backend's sender keeps the written contract (producers.sender.Sender) the producer process relies on:
each of its members, each method taking the contract's parameters."""
import importlib
import inspect
import re

import pytest

from harness.backends import SPECS
from producers.sender import Sender

METHODS = ("from_job", "send_many", "service", "outstanding", "abandon", "close")


def params(function) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_each_backends_sender_implements_the_contract(kind):
    module, _, name = SPECS[kind].sender.partition(":")
    cls = getattr(importlib.import_module(module), name)
    assert isinstance(cls.name, str)
    for method in METHODS:
        assert params(getattr(cls, method)) == params(getattr(Sender, method)), f"{cls.__name__}.{method}"


def test_the_contract_lists_every_member_the_producer_process_calls():
    from pathlib import Path

    text = (Path(inspect.getfile(Sender)).parent / "process.py").read_text()
    called = set(re.findall(r"sender\.(\w+)", text))
    assert called and called <= set(METHODS) | {"name"}, called - set(METHODS)
