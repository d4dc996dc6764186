"""JSON-over-HTTP control API on loopback (stdlib asyncio only), mirroring the server's fault methods.

    GET  /status                                   -> {"ok": true, "hubs": {...}, "connections": n, ...,
                                                        "endpoints": {"amqp_port", "amqps_port", "ws_port",
                                                                      "wss_port", "kafka_port", "kafka_tls_port",
                                                                      "ca_file", ...},
                                                        "kafka": {"connections", "waiting_fetches", ...} | null}
    POST /hubs/<hub>/delete                         -> {"ok": true, "deleted": bool}
    POST /hubs/<hub>/recreate  {"partition_count"?} -> {"ok": true, "hub": {...}}
    POST /hubs/<hub>/age-out   {"partition"?, "up_to_seq"?, "before_time"?: epoch-ms | ISO-8601}
                                                    -> {"ok": true, "dropped": n}
    POST /hubs/<hub>/partitions/<id>/steal {"consumer_group"?: "$Default", "hold_s"?: 0}
                                                    -> {"ok": true, "stolen": n}
    POST /throttle             {"on": bool, "mode"?: "reject" | "detach"}   -> {"ok": true}
    POST /drop-connections     {"graceful"?: bool}  -> {"ok": true, "dropped": n}
    POST /latency              {"ms": number}       -> {"ok": true}

Errors: 400 (bad JSON/arguments), 404 (unknown hub/partition/route) with {"ok": false, "error": "..."}.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from urllib.parse import unquote

MAX_BODY = 64 * 1024


class ControlServer:
    def __init__(self, core) -> None:
        self.core = core
        self._server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._client, host, port)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, payload = await asyncio.wait_for(self._handle(reader), 10.0)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError):
            status, payload = 400, {"ok": False, "error": "bad request"}
        body = json.dumps(payload).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        try:
            writer.write(head + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _handle(self, reader) -> tuple[int, dict]:
        request = await reader.readuntil(b"\r\n\r\n")
        lines = request.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return 400, {"ok": False, "error": "bad request line"}
        method, path = parts[0].upper(), parts[1].split("?", 1)[0]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if length > MAX_BODY or length < 0:
            return 400, {"ok": False, "error": "body too large"}
        raw = await reader.readexactly(length) if length else b""
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return 400, {"ok": False, "error": f"invalid JSON: {exc.msg}"}
        if not isinstance(args, dict):
            return 400, {"ok": False, "error": "JSON body must be an object"}
        try:
            return self._route(method, [unquote(s) for s in path.split("/") if s], args)
        except KeyError as exc:
            return 404, {"ok": False, "error": str(exc.args[0]) if exc.args else "not found"}
        except (ValueError, TypeError) as exc:
            return 400, {"ok": False, "error": str(exc)}

    def _route(self, method: str, segs: list[str], args: dict) -> tuple[int, dict]:
        broker = self.core.broker
        if segs == ["status"] and method == "GET":
            return 200, dict(broker.snapshot(), ok=True, endpoints=self.core.endpoints(),
                             kafka=self.core.kafka_status())
        if method != "POST":
            return (405 if segs else 404), {"ok": False, "error": f"{method} /{'/'.join(segs)} not supported"}
        if segs == ["throttle"]:
            broker.throttle(bool(args.get("on", True)), str(args.get("mode", "reject")))
            return 200, {"ok": True}
        if segs == ["drop-connections"]:
            return 200, {"ok": True, "dropped": broker.drop_connections(bool(args.get("graceful", False)))}
        if segs == ["latency"]:
            broker.set_latency(float(args["ms"]) if "ms" in args else _missing("ms"))
            return 200, {"ok": True}
        if len(segs) == 3 and segs[0] == "hubs":
            hub, action = segs[1], segs[2]
            if action == "delete":
                return 200, {"ok": True, "deleted": broker.delete_hub(hub)}
            if action == "recreate":
                count = args.get("partition_count")
                return 200, {"ok": True, "hub": broker.recreate_hub(hub, None if count is None else int(count))}
            if action == "age-out":
                dropped = broker.age_out(
                    hub, args.get("partition"), _opt_int(args.get("up_to_seq")), _time(args.get("before_time"))
                )
                return 200, {"ok": True, "dropped": dropped}
        if len(segs) == 5 and segs[0] == "hubs" and segs[2] == "partitions" and segs[4] == "steal":
            stolen = broker.steal(segs[1], segs[3], str(args.get("consumer_group", "$Default")),
                                  float(args.get("hold_s", 0.0)))
            return 200, {"ok": True, "stolen": stolen}
        return 404, {"ok": False, "error": f"no route POST /{'/'.join(segs)}"}


def _missing(name: str):
    raise ValueError(f"'{name}' is required")


def _opt_int(value):
    return None if value is None else int(value)


def _time(value):
    if value is None or isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    raise ValueError("before_time must be epoch milliseconds or an ISO-8601 string")
