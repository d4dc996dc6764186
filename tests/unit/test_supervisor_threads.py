"""A child started from a thread outside the main one outlives that thread: the kernel's PR_SET_PDEATHSIG fires
when the thread that forked ends, so a process a fault starts from the nemesis thread (a restarted worker or
broker, the state read at a change) would be SIGKILLed as soon as the nemesis's schedule was done."""
import subprocess
import sys
import threading
import time

from harness.supervisor import Supervisor, _die_with_parent

SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


def started_from_a_thread(start) -> subprocess.Popen:
    out = {}
    thread = threading.Thread(target=lambda: out.update(proc=start()))
    thread.start()
    thread.join()
    time.sleep(1.0)  # the thread has ended; the kernel acts on it at once
    return out["proc"]


def test_the_kernel_kills_a_child_whose_forking_thread_ended():
    """Why the supervisor forks from a thread of its own: the plain way, the child dies with the thread."""
    proc = started_from_a_thread(lambda: subprocess.Popen(SLEEP, preexec_fn=_die_with_parent, start_new_session=True))
    assert proc.poll() == -9


def test_a_supervised_child_started_from_a_thread_outlives_it():
    with Supervisor("threads") as sup:
        proc = started_from_a_thread(lambda: sup.spawn("sleeper", SLEEP).proc)
        assert proc.poll() is None
    assert proc.poll() is not None  # and is stopped with the supervisor all the same
