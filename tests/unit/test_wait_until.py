"""supervisor.wait_until, the one wait loop: the predicate's first true value; a wait that cannot succeed any more
(the process that would make it true exited) ends at once with that process's error; past the timeout, the
caller's error type and message."""
import time

import pytest

from harness.supervisor import wait_until


def test_returns_the_predicates_first_true_value():
    values = iter([0, None, "", 7, 8])
    assert wait_until(lambda: next(values), 5, 0.001) == 7


def test_a_gone_process_ends_the_wait_at_once_with_its_error():
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="exited with 1"):
        wait_until(lambda: False, 30, 0.01, gone=lambda: RuntimeError("the broker exited with 1"))
    assert time.monotonic() - t < 5


def test_the_timeout_raises_the_callers_error_and_message():
    with pytest.raises(TimeoutError, match="timed out after 0s waiting for the topic"):
        wait_until(lambda: False, 0.05, 0.01, "the topic")

    class BackendError(Exception):
        pass

    with pytest.raises(BackendError, match="^no leader for events-3$"):
        wait_until(lambda: False, 0.05, 0.01, error=BackendError, timeout_message=lambda: "no leader for events-3")
