"""SaslHandshake and SaslAuthenticate: PLAIN with the user name ``$ConnectionString`` and a connection string.

As on the service (Microsoft's Kafka pages): mechanism PLAIN only (OAUTHBEARER needs Entra ID, which the emulator
does not have); the password is a namespace (or hub) connection string whose ``SharedAccessKeyName`` and
``SharedAccessKey`` must be one of the configured keys, or whose ``SharedAccessSignature`` must validate against
them, exactly as CBS checks tokens on the AMQP side. A credential reaches what it was made for: a token signed
for one hub (its ``sr``) reaches that hub only, and every request naming another is refused with
TOPIC_AUTHORIZATION_FAILED (KafkaSession.hub); a connection string's ``Endpoint`` or a token's resource naming
another namespace is refused at login. With ``AcceptAnyCredential`` any credential passes. A failed
authentication is answered with SASL_AUTHENTICATION_FAILED and a message that quotes nothing the client sent (a
client that swapped user name and password sent its key as the user name), then the connection is closed (a
Kafka broker closes it after sending that response). SaslHandshake v0 (raw SASL tokens outside Kafka framing,
deprecated by KIP-896) is not offered.
"""

from __future__ import annotations

import hmac
import urllib.parse
from typing import NamedTuple

import harness.emulator.kafka.errors as E
import harness.emulator.sas as sas
from harness.emulator.addresses import audience_path
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
        login = check_plain(session.broker.cfg, token)
        principal, message = login.principal, login.why
        error = E.NONE if principal is not None else E.SASL_AUTHENTICATION_FAILED
        if principal is not None:
            session.authenticated(principal, login.scope)
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


class Login(NamedTuple):
    """What SaslAuthenticate decided: the principal (None: refused, `why` says why, quoting nothing secret) and
    the entity path its credential reaches ("": the whole namespace; a hub's name: that hub only)."""
    principal: str | None
    scope: str = ""
    why: str | None = None


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")


def _host(uri: str) -> str:
    """The host of `sb://host:port/path` (or of `host/path`), lower-cased, without its port."""
    text = urllib.parse.unquote_plus(uri).strip()
    text = text.split("://", 1)[1] if "://" in text else text
    host = text.split("/", 1)[0].lower()
    return host if host.startswith("[") else host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def namespace_error(cfg, uri: str) -> str | None:
    """Why a credential naming `uri` (a connection string's Endpoint, a token's resource) is for another
    namespace: this one answers to loopback addresses and to its own name (`<namespace>.servicebus.windows.net`
    for host-name clients); None when it is this one's, or names no host."""
    host = _host(uri)
    ns = cfg.namespace.lower()
    if not host or host in LOOPBACK_HOSTS or host.startswith("127.") or host == ns or host.startswith(ns + "."):
        return None
    return (f"Authentication failed: the credential is for namespace host {host!r}, not this namespace "
            f"({cfg.namespace!r})")


def check_plain(cfg, token: bytes) -> Login:
    """Login(principal, scope) when the PLAIN token carries an acceptable credential, else Login(None, why=...)."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        return Login(None, why="Invalid SASL/PLAIN request: expected authzid, user name and password separated "
                               "by NUL")
    user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if cfg.accept_any_credential:
        return Login(user or "anonymous")
    if user != USER:  # what was sent is not quoted: a client that swapped the two sent its key as the user name
        swapped = " (user name and password look swapped)" if password == USER else ""
        return Login(None, why=f"Authentication failed: the user name must be {USER!r} with the namespace "
                               f"connection string as the password; the user name sent ({len(user)} characters) "
                               f"is not{swapped}")
    fields = parse_connection_string(password)
    wrong_namespace = namespace_error(cfg, fields.get("endpoint", ""))
    if wrong_namespace:
        return Login(None, why=wrong_namespace)
    signature = fields.get("sharedaccesssignature")
    if signature:
        try:
            sas.validate(signature, cfg.sas_keys)
            token_fields = sas.parse_token(signature)
        except sas.SasError as exc:
            return Login(None, why=f"Authentication failed: InvalidSignature: {exc}")
        resource = token_fields["sr"]
        wrong_namespace = namespace_error(cfg, resource)
        if wrong_namespace:
            return Login(None, why=wrong_namespace)
        return Login(token_fields["skn"], audience_path(urllib.parse.unquote_plus(resource)))
    name, key = fields.get("sharedaccesskeyname"), fields.get("sharedaccesskey")
    if not name or key is None:
        return Login(None, why="Authentication failed: the password must be a connection string with "
                               "SharedAccessKeyName and SharedAccessKey (or SharedAccessSignature)")
    expected = cfg.sas_keys.get(name)
    if expected is None:
        return Login(None, why=f"Authentication failed: InvalidSignature: unknown key name {name!r}")
    if not hmac.compare_digest(expected.encode(), key.encode()):
        return Login(None, why=f"Authentication failed: InvalidSignature: the key for {name!r} does not match")
    return Login(name)


APIS = (
    Api(SASL_HANDSHAKE, "SaslHandshake", 1, 1, None, handshake, before_auth=True),
    Api(SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2, 2, authenticate, before_auth=True),
)
