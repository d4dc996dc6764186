"""A certificate authority and a server certificate for the embedded broker's TLS listener, made per broker.

Why generated here: a SASL_SSL listener is only proven when clients verify the broker against a CA they were given,
so the harness makes a throw-away CA and a server certificate for 127.0.0.1 / localhost (every listener binds
loopback) with the JDK's own `keytool` (present wherever the broker runs; no Python crypto dependency). What is
written, under the broker's own directory:
- `ca.pem`: the CA certificate, what librdkafka's `ssl.ca.location` and a Java client's PEM truststore
  (`ssl.truststore.type=PEM`) read;
- `server.p12`: the broker's key and its certificate chain (PKCS12), protected by a random password that is never
  written to a file: keytool reads it from its environment and the broker from its own (`${env:...}`, Kafka's
  EnvVarConfigProvider). The CA's private key is deleted once the server certificate is signed.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends.base import BackendError

PASSWORD_VAR = "HARNESS_KAFKA_TLS_PASSWORD"  # the keystore password's name in keytool's and the broker's env
VALIDITY_DAYS = 30
SUBJECT_NAMES = "ip:127.0.0.1,dns:localhost"


@dataclass(frozen=True)
class ServerTLS:
    ca_pem: Path
    keystore: Path
    password: str = field(repr=False)  # the keystore's: to the broker through its environment, never a file

    def broker_props(self) -> dict[str, str]:
        """server.properties for every SSL/SASL_SSL listener: the keystore, its password as an env reference."""
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.keystore),
                "ssl.keystore.password": "${env:" + PASSWORD_VAR + "}", "ssl.client.auth": "none"}

    def env(self) -> dict[str, str]:
        return {PASSWORD_VAR: self.password}


def _keytool(env: dict[str, str], *args: str) -> None:
    tool = shutil.which("keytool")
    if tool is None:
        raise BackendError("a TLS listener needs the JDK's keytool on PATH (it makes the broker's certificate); "
                           "install a full JDK 17")
    proc = subprocess.run([tool, "-J-Xmx64m", *args, "-noprompt"], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise BackendError(f"keytool {args[0]} failed: {(proc.stderr or proc.stdout).strip()[-1500:]}")


def generate(directory: Path) -> ServerTLS:
    """A fresh CA and a server certificate (EC P-256, SAN 127.0.0.1 and localhost) signed by it, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(18)
    env = {**os.environ, PASSWORD_VAR: password}
    ca_store, keystore = directory / "ca.p12", directory / "server.p12"
    csr, signed, ca_pem = directory / "server.csr", directory / "server.pem", directory / "ca.pem"
    for path in (ca_store, keystore, csr, signed, ca_pem):
        path.unlink(missing_ok=True)
    store = ["-storetype", "PKCS12", "-storepass:env", PASSWORD_VAR]
    key = ["-keyalg", "EC", "-groupname", "secp256r1", "-validity", str(VALIDITY_DAYS)]
    try:
        _keytool(env, "-genkeypair", "-alias", "ca", "-dname", "CN=spark-stream-harness test CA", *key,
                 "-ext", "bc:c", "-ext", "ku:c=keyCertSign,cRLSign", "-keystore", str(ca_store), *store)
        _keytool(env, "-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca_store), *store, "-file", str(ca_pem))
        _keytool(env, "-genkeypair", "-alias", "broker", "-dname", "CN=localhost", *key,
                 "-keystore", str(keystore), *store)
        _keytool(env, "-certreq", "-alias", "broker", "-keystore", str(keystore), *store, "-file", str(csr))
        _keytool(env, "-gencert", "-rfc", "-alias", "ca", "-keystore", str(ca_store), *store, "-infile", str(csr),
                 "-outfile", str(signed), "-validity", str(VALIDITY_DAYS), "-ext", f"san={SUBJECT_NAMES}",
                 "-ext", "eku=serverAuth", "-ext", "ku:c=digitalSignature,keyAgreement")
        _keytool(env, "-importcert", "-alias", "ca", "-file", str(ca_pem), "-keystore", str(keystore), *store)
        _keytool(env, "-importcert", "-alias", "broker", "-file", str(signed), "-keystore", str(keystore), *store)
    finally:
        for path in (ca_store, csr, signed):  # the CA's key signs nothing more; only ca.pem and server.p12 stay
            path.unlink(missing_ok=True)
    return ServerTLS(ca_pem, keystore, password)
