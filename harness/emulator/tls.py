"""A private CA and a loopback server certificate for the emulator's TLS (AMQPS) and WSS listeners.

Clients that are given a host name and a credential instead of an emulator connection string always use TLS, so
the emulator needs a certificate they can verify. It is made with the ``openssl`` command-line tool (the
``cryptography`` package is not a dependency): a self-signed CA, and a server certificate it signs for
``localhost``, ``127.0.0.1`` and ``::1``. Clients trust the CA file (``connection_verify=<ca_file>`` in the SDK).
Files are reused when a directory already holds a valid, unexpired set.
"""

from __future__ import annotations

import os
import secrets
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SUBJECT_ALT_NAMES = "DNS:localhost,IP:127.0.0.1,IP:::1"
_EXTENSIONS = (
    f"subjectAltName={SUBJECT_ALT_NAMES}\n"
    "basicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage=serverAuth\n"
    "subjectKeyIdentifier=hash\n"
    "authorityKeyIdentifier=keyid\n"
)


class TlsUnavailable(RuntimeError):
    """No certificate could be made (``openssl`` missing or failing); TLS listeners cannot start."""


@dataclass(frozen=True)
class CertFiles:
    ca_file: str  # what clients trust
    cert_file: str  # server certificate (PEM)
    key_file: str  # server private key (PEM)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def ensure_certificates(directory: str | os.PathLike | None = None) -> tuple[CertFiles, str | None]:
    """Certificates in ``directory`` (made there if absent or unusable); with None, in a new temporary directory.

    Returns the files and the temporary directory to remove when done (None when ``directory`` was given).
    """
    owned = None
    if directory is None:
        owned = tempfile.mkdtemp(prefix="eventhubs-emulator-tls-")
        directory = owned
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    files = CertFiles(str(root / "ca.pem"), str(root / "server.pem"), str(root / "server.key"))
    if not _usable(files):
        try:
            _generate(root, files)
        except TlsUnavailable:
            if owned:
                shutil.rmtree(owned, ignore_errors=True)
            raise
    return files, owned


def _usable(files: CertFiles) -> bool:
    if not all(os.path.exists(p) for p in (files.ca_file, files.cert_file, files.key_file)):
        return False
    try:
        ssl.create_default_context(cafile=files.ca_file)  # the CA parses
        files.server_context()  # the key matches the certificate
        out = _openssl("x509", "-in", files.cert_file, "-noout", "-checkend", "86400", check=False)
        return out.returncode == 0
    except (ssl.SSLError, OSError, TlsUnavailable):
        return False


def _openssl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("openssl")
    if exe is None:
        raise TlsUnavailable("the 'openssl' command is not installed; it is needed to make the emulator's "
                             "TLS certificate (apt-get install openssl), or start without TLS listeners")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    if check and proc.returncode != 0:
        raise TlsUnavailable(f"openssl {args[0]} failed: {proc.stderr.strip()[-400:]}")
    return proc


def _generate(root: Path, files: CertFiles) -> None:
    ca_key = root / "ca.key"
    csr = root / "server.csr"
    ext = root / "server.ext"
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", str(ca_key), "-out", files.ca_file, "-days", "3650",
             "-subj", "/CN=spark-stream-harness Event Hubs emulator CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _openssl("req", "-new", *ec, "-keyout", files.key_file, "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text(_EXTENSIONS)
    _openssl("x509", "-req", "-in", str(csr), "-CA", files.ca_file, "-CAkey", str(ca_key),
             "-set_serial", f"0x{secrets.token_hex(16)}", "-days", "825", "-out", files.cert_file,
             "-extfile", str(ext))
    for leftover in (csr, ext):
        leftover.unlink(missing_ok=True)
    for private in (ca_key, Path(files.key_file)):
        os.chmod(private, 0o600)
