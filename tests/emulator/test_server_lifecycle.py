"""Starting an emulator twice (`with EmulatorServer().start() as emu`) must not start a second server."""
import threading

from harness.emulator.server import EmulatorServer


def test_start_is_idempotent_and_stop_ends_the_thread():
    before = {t for t in threading.enumerate() if t.name == "eventhubs-emulator"}
    with EmulatorServer().start() as emu:
        port, core = emu.port, emu.core
        assert emu.start() is emu and emu.port == port and emu.core is core
        running = {t for t in threading.enumerate() if t.name == "eventhubs-emulator"} - before
        assert len(running) == 1
    assert not any(t.is_alive() for t in running)
