"""Shared Access Signature tokens: parse, validate against configured keys, and generate (for tests/tools).

Token: ``SharedAccessSignature sr=<url-encoded uri>&sig=<url-encoded base64 HMAC-SHA256>&se=<expiry>&skn=<key>``;
the signature covers ``<url-encoded uri>\\n<expiry>`` with the key's UTF-8 bytes as the HMAC key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import urllib.parse


class SasError(Exception):
    pass


def parse_token(token: str) -> dict[str, str]:
    prefix = "SharedAccessSignature "
    if not token.startswith(prefix):
        raise SasError("token is not a SharedAccessSignature")
    fields = {}
    for part in token[len(prefix):].split("&"):
        key, sep, value = part.partition("=")
        if not sep:  # not quoted: a token is a credential
            raise SasError(f"malformed token: field {len(fields) + 1} has no '=' ({len(part)} characters)")
        fields[key.strip()] = value
    for needed in ("sr", "sig", "se", "skn"):
        if needed not in fields:
            raise SasError(f"token lacks {needed}")
    return fields


def sign(resource_uri_encoded: str, expiry: str, key: str) -> str:
    to_sign = f"{resource_uri_encoded}\n{expiry}".encode("utf-8")
    digest = hmac.new(key.encode("utf-8"), to_sign, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def make_token(uri: str, key_name: str, key: str, ttl_s: int = 3600) -> str:
    encoded = urllib.parse.quote_plus(uri)
    expiry = str(int(time.time()) + ttl_s)
    sig = urllib.parse.quote_plus(sign(encoded, expiry, key))
    return f"SharedAccessSignature sr={encoded}&sig={sig}&se={expiry}&skn={key_name}"


def validate(token: str, keys: dict[str, str], audience: str | None = None, now: float | None = None) -> None:
    """Raise SasError unless ``token`` is signed by one of ``keys`` and not expired.

    ``audience``, when given, must be the token's resource or lie under it (a namespace-wide token is good for
    every hub).
    """
    fields = parse_token(token)
    key_name = urllib.parse.unquote_plus(fields["skn"])
    key = keys.get(key_name)
    if key is None:
        raise SasError(f"unknown key name {key_name!r}")
    expected = sign(fields["sr"], fields["se"], key)
    given = urllib.parse.unquote_plus(fields["sig"])
    if not hmac.compare_digest(expected, given):
        raise SasError("signature does not match")
    try:
        expiry = int(fields["se"])
    except ValueError:
        raise SasError("expiry is not an integer") from None
    if expiry < (time.time() if now is None else now):
        raise SasError("token expired")
    if audience is not None:
        resource = _norm(urllib.parse.unquote_plus(fields["sr"]))
        if not _norm(audience).startswith(resource):
            raise SasError(f"token for {resource!r} does not cover {audience!r}")


def _norm(uri: str) -> str:
    uri = uri.lower().rstrip("/")
    for scheme in ("sb://", "amqps://", "amqp://", "https://", "http://"):
        if uri.startswith(scheme):
            uri = uri[len(scheme):]
            break
    return uri
