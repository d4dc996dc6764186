"""``harness bench emulator``: SDK clients in several processes through the emulator, with CPU accounting.

The emulator runs in its own process (its CPU is read with psutil); each producer/consumer process runs the
unmodified azure-eventhub SDK on its own partition and reports events, wall time and ``time.process_time()``.
Phases start on a barrier after the clients are connected, so connection setup is not counted.

Result keys: `rows` (the suite's table, harness.bench: send and receive events/s, and the emulator's CPU per 1000
events against the SDK clients' own, goal <= 0.5: the emulator must stay cheap next to the pure-Python clients),
send_eps, receive_eps, emulator_cpu_s_per_1k, clients_cpu_s_per_1k (CPU seconds per 1000 events moved, sends and
receives together), producer_processes, plus per-phase details.

The Kafka endpoint gets the same two phases and rows with librdkafka clients (harness/bench/emulator_kafka.py) on
a hub of its own: kafka_send_eps, kafka_receive_eps, kafka_emulator_cpu_s_per_1k, kafka_clients_cpu_s_per_1k,
kafka_emulator_to_clients_cpu_ratio, kafka_send / kafka_receive (per-phase details).
"""

from __future__ import annotations

import multiprocessing as mp
import time

from harness.files import atomic
from harness.bench import emulator_kafka

HUB = "bench"
BODY = 100
CPU_RATIO_GOAL = 0.5  # emulator CPU per event / the SDK clients' CPU per event


def _emulator_main(partitions: int, port_q, stop_ev) -> None:
    from harness.emulator.config import EmulatorConfig, HubConfig
    from harness.emulator.server import EmulatorServer

    cfg = EmulatorConfig(hubs=tuple(HubConfig(name, partitions, max_bytes_per_partition=1 << 30)
                                    for name in (HUB, emulator_kafka.HUB)))
    server = EmulatorServer(cfg, tls_port=None, ws_port=None, wss_port=None, kafka_port=0,
                            kafka_tls_port=None).start()
    port_q.put((server.connection_string(), server.kafka_port))  # the string carries the key the emulator checks
    stop_ev.wait()
    server.stop()


def _producer_main(conn_str: str, pid: str, events: int, batch_size: int, barrier, out_q) -> None:
    from azure.eventhub import EventData, EventHubProducerClient

    from harness.backends.eventhubs.sender import fill_batch

    body = b"x" * BODY
    client = EventHubProducerClient.from_connection_string(conn_str, eventhub_name=HUB)
    with client:
        client.get_partition_ids()
        warm = client.create_batch(partition_id=pid)
        warm.add(EventData(body))
        client.send_batch(warm)  # opens the partition's link
        barrier.wait()
        cpu0, t0 = time.process_time(), time.perf_counter()
        sent = 0
        while sent < events:
            batch = client.create_batch(partition_id=pid)
            n = fill_batch(batch, lambda _: EventData(body), min(batch_size, events - sent))
            client.send_batch(batch)
            sent += n
        t1, cpu1 = time.perf_counter(), time.process_time()
    out_q.put(("send", pid, sent, t0, t1, cpu1 - cpu0))


def _consumer_main(conn_str: str, pid: str, expected: int, prefetch: int, barrier, out_q) -> None:
    import threading

    from azure.eventhub import EventHubConsumerClient

    client = EventHubConsumerClient.from_connection_string(conn_str, consumer_group="$Default", eventhub_name=HUB)
    state = {"n": 0, "t1": None}
    done = threading.Event()

    def on_event_batch(ctx, events):
        state["n"] += len(events)
        if state["n"] >= expected and not done.is_set():
            state["t1"] = time.perf_counter()
            done.set()

    barrier.wait()
    cpu0, t0 = time.process_time(), time.perf_counter()
    th = threading.Thread(target=client.receive_batch, kwargs=dict(
        on_event_batch=on_event_batch, partition_id=pid, starting_position="-1", prefetch=prefetch,
        max_batch_size=prefetch, max_wait_time=1), daemon=True)
    th.start()
    done.wait(600)
    cpu1 = time.process_time()
    client.close()
    th.join(30)
    out_q.put(("recv", pid, state["n"], t0, state["t1"] or time.perf_counter(), cpu1 - cpu0))


def _phase(ctx, target, args_for, n: int, emu_proc):
    barrier = ctx.Barrier(n + 1)
    out_q = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args_for(i), barrier, out_q), daemon=True) for i in range(n)]
    for p in procs:
        p.start()
    barrier.wait(timeout=120)
    emu_cpu0 = _cpu(emu_proc)
    results = [out_q.get(timeout=900) for _ in range(n)]
    emu_cpu1 = _cpu(emu_proc)
    for p in procs:
        p.join(30)
    count = sum(r[2] for r in results)
    start = min(r[3] for r in results)
    end = max(r[4] for r in results)
    return {
        "events": count, "seconds": end - start, "eps": count / max(end - start, 1e-9),
        "clients_cpu_s": sum(r[5] for r in results), "emulator_cpu_s": emu_cpu1 - emu_cpu0,
    }


def _cpu(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def run_bench(json_path: str | None, quick: bool = False, *, quiet: bool = True, producers: int = 4,
              events_per_producer: int | None = None, batch_size: int = 1000, prefetch: int = 300) -> dict:
    """Send then receive ``producers * events_per_producer`` 100-byte events (25,000 each, 5,000 with `quick`);
    returns the figures. `quiet=False` also prints this bench's own table of the phases."""
    if events_per_producer is None:
        events_per_producer = 5_000 if quick else 25_000
    ctx = mp.get_context("spawn")
    port_q, stop_ev = ctx.Queue(), ctx.Event()
    emu = ctx.Process(target=_emulator_main, args=(producers, port_q, stop_ev), daemon=True)
    emu.start()
    try:
        conn, kafka_port = port_q.get(timeout=60)
        send = _phase(ctx, _producer_main, lambda i: (conn, str(i), events_per_producer, batch_size), producers,
                      emu.pid)
        expected = events_per_producer + 1  # plus the warm-up event
        recv = _phase(ctx, _consumer_main, lambda i: (conn, str(i), expected, prefetch), producers, emu.pid)
        ksend = _phase(ctx, emulator_kafka.producer_main,
                       lambda i: (kafka_port, conn, str(i), events_per_producer, BODY), producers, emu.pid)
        krecv = _phase(ctx, emulator_kafka.consumer_main, lambda i: (kafka_port, conn, str(i), expected),
                       producers, emu.pid)
    finally:
        stop_ev.set()
        emu.join(15)
        if emu.is_alive():
            emu.terminate()
    moved = send["events"] + recv["events"]
    result = {
        "send_eps": round(send["eps"], 1),
        "receive_eps": round(recv["eps"], 1),
        "emulator_cpu_s_per_1k": round(1000 * (send["emulator_cpu_s"] + recv["emulator_cpu_s"]) / moved, 4),
        "clients_cpu_s_per_1k": round(1000 * (send["clients_cpu_s"] + recv["clients_cpu_s"]) / moved, 4),
        "producer_processes": producers,
        "consumer_processes": producers,
        "events_sent": send["events"],
        "events_received": recv["events"],
        "batch_size": batch_size,
        "prefetch": prefetch,
        "body_bytes": BODY,
        "send": {k: round(v, 4) for k, v in send.items()},
        "receive": {k: round(v, 4) for k, v in recv.items()},
    }
    result["emulator_to_clients_cpu_ratio"] = round(
        result["emulator_cpu_s_per_1k"] / max(result["clients_cpu_s_per_1k"], 1e-9), 3
    )
    kmoved = ksend["events"] + krecv["events"]
    result.update({
        "kafka_send_eps": round(ksend["eps"], 1),
        "kafka_receive_eps": round(krecv["eps"], 1),
        "kafka_emulator_cpu_s_per_1k": round(1000 * (ksend["emulator_cpu_s"] + krecv["emulator_cpu_s"]) / kmoved, 4),
        "kafka_clients_cpu_s_per_1k": round(1000 * (ksend["clients_cpu_s"] + krecv["clients_cpu_s"]) / kmoved, 4),
        "kafka_events_sent": ksend["events"],
        "kafka_events_received": krecv["events"],
        "kafka_send": {k: round(v, 4) for k, v in ksend.items()},
        "kafka_receive": {k: round(v, 4) for k, v in krecv.items()},
    })
    result["kafka_emulator_to_clients_cpu_ratio"] = round(
        result["kafka_emulator_cpu_s_per_1k"] / max(result["kafka_clients_cpu_s_per_1k"], 1e-9), 3
    )
    result["rows"] = _rows(result)
    result["quick"] = quick
    if json_path:
        atomic.write_json(json_path, result)
    if not quiet:
        _print_table(result)
    return result


def _rows(r: dict) -> list[dict]:
    from harness.bench import row

    ratio = r["emulator_to_clients_cpu_ratio"]
    kratio = r["kafka_emulator_to_clients_cpu_ratio"]
    return [
        row("send (SDK producers)", r["send_eps"], "events/s"),
        row("receive (SDK consumers)", r["receive_eps"], "events/s"),
        row("emulator CPU per 1k events", r["emulator_cpu_s_per_1k"], "CPU s",
            reference=r["clients_cpu_s_per_1k"], reference_name="SDK clients' CPU", ratio=ratio,
            goal=f"<= {CPU_RATIO_GOAL}", ok=ratio <= CPU_RATIO_GOAL),
        row("Kafka endpoint send (librdkafka producers)", r["kafka_send_eps"], "events/s"),
        row("Kafka endpoint receive (librdkafka consumers)", r["kafka_receive_eps"], "events/s"),
        row("emulator CPU per 1k events, Kafka endpoint", r["kafka_emulator_cpu_s_per_1k"], "CPU s",
            reference=r["kafka_clients_cpu_s_per_1k"], reference_name="librdkafka clients' CPU", ratio=kratio,
            goal=f"<= {CPU_RATIO_GOAL}", ok=kratio <= CPU_RATIO_GOAL),
    ]


def _print_table(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Event Hubs emulator bench ({r['producer_processes']} producer / "
                    f"{r['consumer_processes']} consumer processes, {r['body_bytes']} B events)")
    for col in ("phase", "events", "seconds", "events/s", "emulator CPU s", "clients CPU s"):
        t.add_column(col, justify="right")
    for name in ("send", "receive", "kafka_send", "kafka_receive"):
        p = r[name]
        t.add_row(name, f"{p['events']:.0f}", f"{p['seconds']:.2f}", f"{p['eps']:,.0f}", f"{p['emulator_cpu_s']:.2f}",
                  f"{p['clients_cpu_s']:.2f}")
    Console().print(t)
    Console().print(
        f"CPU per 1k events moved: emulator {r['emulator_cpu_s_per_1k']:.4f} s, clients "
        f"{r['clients_cpu_s_per_1k']:.4f} s (ratio {r['emulator_to_clients_cpu_ratio']:.2f}); Kafka endpoint: "
        f"emulator {r['kafka_emulator_cpu_s_per_1k']:.4f} s, librdkafka clients {r['kafka_clients_cpu_s_per_1k']:.4f} s "
        f"(ratio {r['kafka_emulator_to_clients_cpu_ratio']:.2f})"
    )
