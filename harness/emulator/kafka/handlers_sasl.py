"""SaslHandshake and SaslAuthenticate: PLAIN with the user name ``$ConnectionString`` and a connection string.

As on the service (Microsoft's Kafka pages): mechanism PLAIN only (OAUTHBEARER needs Entra ID, which the emulator
does not have); the password is a namespace (or hub) connection string whose ``SharedAccessKeyName`` and
``SharedAccessKey`` must be one of the configured keys, or whose ``SharedAccessSignature`` must validate against
them, exactly as CBS checks tokens on the AMQP side. With ``AcceptAnyCredential`` any credential passes. A failed
authentication is answered with SASL_AUTHENTICATION_FAILED and a message, then the connection is closed (a Kafka
broker closes it after sending that response). SaslHandshake v0 (raw SASL tokens outside Kafka framing,
deprecated by KIP-896) is not offered.
"""

from __future__ import annotations

import hmac

import harness.emulator.kafka.errors as E
import harness.emulator.sas as sas
from .wire import Api, Reader, Writer

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MECHANISMS = ["PLAIN"]
USER = "$ConnectionString"


async def handshake(session, version: int, r: Reader) -> bytes:
    mechanism = r.string()
    if session.principal is not None:
        error = E.ILLEGAL_SASL_STATE
    elif mechanism != "PLAIN":
        error = E.UNSUPPORTED_SASL_MECHANISM
    else:
        error = E.NONE
        session.sasl_mechanism = mechanism
    w = Writer().int16(error).array(MECHANISMS, Writer.string)
    if error != E.NONE:
        session.broker.loop.call_soon(session.close)
    return w.getvalue()


async def authenticate(session, version: int, r: Reader) -> bytes:
    flex = version >= 2
    token = r.compact_bytes() if flex else r.bytes_()
    r.tags(flex)
    if session.sasl_mechanism is None or session.principal is not None:
        error, message = E.ILLEGAL_SASL_STATE, "SaslAuthenticate without a successful SaslHandshake for PLAIN"
    else:
        principal, message = check_plain(session.broker.cfg, token)
        error = E.NONE if principal is not None else E.SASL_AUTHENTICATION_FAILED
        if principal is not None:
            session.authenticated(principal)
    w = Writer().int16(error).nstr(message, flex)
    w.compact_bytes(b"") if flex else w.bytes_(b"")
    if version >= 1:
        w.int64(0)  # session lifetime: no re-authentication required
    if error != E.NONE:
        session.broker.loop.call_soon(session.close)
    return w.tags(flex).getvalue()


def parse_connection_string(text: str) -> dict[str, str]:
    fields = {}
    for part in text.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key.strip().lower()] = value.strip()
    return fields


def check_plain(cfg, token: bytes) -> tuple[str | None, str | None]:
    """(principal, None) when the PLAIN token carries an acceptable credential, else (None, why)."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return None, "Invalid SASL/PLAIN request: expected authzid, user name and password separated by NUL"
    user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if cfg.accept_any_credential:
        return user or "anonymous", None
    if user != USER:
        return None, (f"Authentication failed: the user name must be {USER!r} with the namespace connection "
                      f"string as the password, got {user!r}")
    fields = parse_connection_string(password)
    signature = fields.get("sharedaccesssignature")
    if signature:
        try:
            sas.validate(signature, cfg.sas_keys)
        except sas.SasError as exc:
            return None, f"Authentication failed: InvalidSignature: {exc}"
        return sas.parse_token(signature)["skn"], None
    name, key = fields.get("sharedaccesskeyname"), fields.get("sharedaccesskey")
    if not name or key is None:
        return None, ("Authentication failed: the password must be a connection string with SharedAccessKeyName "
                      "and SharedAccessKey (or SharedAccessSignature)")
    expected = cfg.sas_keys.get(name)
    if expected is None:
        return None, f"Authentication failed: InvalidSignature: unknown key name {name!r}"
    if not hmac.compare_digest(expected.encode(), key.encode()):
        return None, f"Authentication failed: InvalidSignature: the key for {name!r} does not match"
    return name, None


APIS = (
    Api(SASL_HANDSHAKE, "SaslHandshake", 1, 1, None, handshake, before_auth=True),
    Api(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, 2, authenticate, before_auth=True),
)
