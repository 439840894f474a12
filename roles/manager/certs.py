"""Self-managed webhook certificates (reference B.1.2): a CA and a serving certificate kept in a Secret.

Every manager replica runs a :class:`CertManager`. One pass (:meth:`CertManager.ensure`):

1. read Secret ``<POD_NAMESPACE>/<SECRET_NAME>``; keep its certificates if the CA and the serving
   certificate parse, match their keys, chain, cover the Service's DNS names (and the extra hosts)
   and are not about to expire (CA: 90 days, serving: 30 days); otherwise generate new ones,
   keeping a still-good CA so that the ``caBundle`` does not change needlessly;
2. write the Secret (create when absent, as Koordinator's secret cert writer does; a replica that
   lost the race re-reads and adopts the winner's certificates; an update carries the
   resourceVersion read, a conflict re-reads). RBAC cannot limit ``create`` by name, so the
   manager's Role grants it on the namespace's secrets and every other verb on this Secret only
   (``manifests/rbac/manager.yaml``);
3. write ``tls.crt``, ``tls.key`` and ``ca.crt`` into the certificate directory atomically, only
   when their content changed (the webhook server re-reads them on the next handshake);
4. set ``caBundle`` in every webhook of the mutating and validating configurations, when different.

The Secret holds the keys Koordinator's secret cert writer stores: ``ca-cert.pem``, ``ca-key.pem``,
``cert.pem``, ``key.pem`` and the ``tls.crt``/``tls.key`` copies of the last two.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from koordinator.atomicfile import write_atomic
from koordinator.runtime import errors

log = logging.getLogger("koordinator.manager.certs")

__all__ = ["CertConfig", "CertError", "CertManager", "Artifacts", "generate_ca", "generate_serving",
           "CA_CERT", "CA_KEY", "SERVER_CERT", "SERVER_KEY", "SERVER_CERT2", "SERVER_KEY2"]

# Secret data keys (Koordinator's pkg/webhook/util/writer).
CA_KEY = "ca-key.pem"
CA_CERT = "ca-cert.pem"
SERVER_KEY = "key.pem"
SERVER_KEY2 = "tls.key"
SERVER_CERT = "cert.pem"
SERVER_CERT2 = "tls.crt"

# Files in the certificate directory (controller-runtime's names; ca.crt for clients).
CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"

CA_VALIDITY = datetime.timedelta(days=3650)
SERVING_VALIDITY = datetime.timedelta(days=365)
CA_RENEW_BEFORE = datetime.timedelta(days=90)
SERVING_RENEW_BEFORE = datetime.timedelta(days=30)
# Backdated so that a peer whose clock is a little behind still accepts a fresh certificate.
_BACKDATE = datetime.timedelta(hours=1)
CA_COMMON_NAME = "webhook-cert-ca"

RESYNC_PERIOD = 300.0
_ATTEMPTS = 6

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_HOSTNAME = re.compile(r"^(?=.{1,253}$)(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


class CertError(Exception):
    """The certificates could not be ensured (after retries); the message says which step failed."""


# -- configuration --------------------------------------------------------------------------


_ENV = {
    "cert_dir": "WEBHOOK_CERT_DIR",
    "secret_name": "SECRET_NAME",
    "namespace": "POD_NAMESPACE",
    "service_name": "SERVICE_NAME",
    "mutating_webhook_name": "MUTATING_WEBHOOK_NAME",
    "validating_webhook_name": "VALIDATING_WEBHOOK_NAME",
}


@dataclass
class CertConfig:
    """Where the certificates live and whom they are for; defaults are Koordinator's.

    ``extra_hosts`` are DNS names or IP addresses added to the serving certificate's SANs besides
    the Service's names (``koordinator local`` needs ``127.0.0.1`` and ``localhost``).
    """

    cert_dir: str = "/tmp/koordinator-webhook-certs"
    secret_name: str = "koordinator-webhook-certs"
    namespace: str = "koordinator-system"
    service_name: str = "koordinator-webhook-service"
    mutating_webhook_name: str = "koordinator-mutating-webhook-configuration"
    validating_webhook_name: str = "koordinator-validating-webhook-configuration"
    extra_hosts: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "extra_hosts":
                continue
            value = getattr(self, f.name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"webhook certificates: {f.name} ({_ENV[f.name]}) must be a non-empty string, "
                                 f"got {value!r}")
        for name in ("namespace", "service_name"):
            value = getattr(self, name)
            if not _DNS1123_LABEL.match(value):
                raise ValueError(f"webhook certificates: {name} ({_ENV[name]}) {value!r} is not a DNS-1123 label")
        if isinstance(self.extra_hosts, str):
            self.extra_hosts = [h for h in self.extra_hosts.split(",") if h.strip()]
        hosts = []
        for host in self.extra_hosts:
            host = str(host).strip()
            if not _is_ip(host) and not _HOSTNAME.match(host):
                raise ValueError(f"webhook certificates: extra_hosts entry {host!r} is not a DNS name or IP address")
            hosts.append(host)
        self.extra_hosts = hosts

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, **overrides: Any) -> "CertConfig":
        """Settings from Koordinator's environment variables (empty ones count as unset), then ``overrides``."""
        values: dict[str, Any] = {}
        for attr, env in _ENV.items():
            value = environ.get(env, "")
            if value:
                values[attr] = value
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"CertConfig has no field(s) {', '.join(sorted(unknown))}")
        values.update(overrides)
        return cls(**values)

    @property
    def common_name(self) -> str:
        return f"{self.service_name}.{self.namespace}.svc"

    def hosts(self) -> list[str]:
        """Every name the serving certificate must cover: the Service's DNS names, then the extra hosts."""
        svc, ns = self.service_name, self.namespace
        names = [svc, f"{svc}.{ns}", f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local", *self.extra_hosts]
        return list(dict.fromkeys(names))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


# -- certificates ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Artifacts:
    """PEM bytes of the CA and the serving certificate with their keys."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes

    def secret_data(self) -> dict[str, str]:
        b64 = lambda data: base64.b64encode(data).decode("ascii")  # noqa: E731
        return {CA_CERT: b64(self.ca_cert), CA_KEY: b64(self.ca_key), SERVER_CERT: b64(self.cert),
                SERVER_KEY: b64(self.key), SERVER_CERT2: b64(self.cert), SERVER_KEY2: b64(self.key)}

    @classmethod
    def from_secret(cls, secret: dict) -> "Artifacts | None":
        """The Secret's certificates, or None when a key is missing or not base64."""
        data = secret.get("data") or {}
        try:
            raw = {k: base64.b64decode(data[k], validate=True) for k in (CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY)}
        except (KeyError, TypeError, ValueError):
            return None
        return cls(ca_cert=raw[CA_CERT], ca_key=raw[CA_KEY], cert=raw[SERVER_CERT], key=raw[SERVER_KEY])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def generate_ca(validity: datetime.timedelta = CA_VALIDITY, *,
                common_name: str = CA_COMMON_NAME) -> tuple[bytes, bytes]:
    """A new self-signed CA (ECDSA P-256): (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def generate_serving(ca_cert_pem: bytes, ca_key_pem: bytes, hosts: list[str], *,
                     validity: datetime.timedelta = SERVING_VALIDITY,
                     common_name: str | None = None) -> tuple[bytes, bytes]:
    """A serving certificate for ``hosts`` (DNS names and IPs) signed by the CA: (certificate PEM, key PEM)."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(h)) if _is_ip(h) else x509.DNSName(h)
                                    for h in hosts]
    now = _now()
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca_cert.public_key()), critical=False)  # type: ignore[arg-type]
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def _key_matches(cert: x509.Certificate, key_pem: bytes) -> bool:
    key = serialization.load_pem_private_key(key_pem, password=None)
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    return (cert.public_key().public_bytes(serialization.Encoding.DER, pub)
            == key.public_key().public_bytes(serialization.Encoding.DER, pub))


def ca_problem(a: Artifacts, now: datetime.datetime | None = None) -> str | None:
    """Why the CA of ``a`` must be replaced, or None."""
    now = now or _now()
    try:
        ca = x509.load_pem_x509_certificate(a.ca_cert)
        if not _key_matches(ca, a.ca_key):
            return "the CA key does not match the CA certificate"
    except (ValueError, TypeError) as err:
        return f"the CA does not parse: {err}"
    try:
        if not ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return "the CA certificate is not a CA"
    except x509.ExtensionNotFound:
        return "the CA certificate has no basic constraints"
    if ca.not_valid_before_utc > now + _BACKDATE:
        return f"the CA is not valid before {ca.not_valid_before_utc.isoformat()}"
    if ca.not_valid_after_utc <= now + CA_RENEW_BEFORE:
        return f"the CA expires at {ca.not_valid_after_utc.isoformat()}"
    return None


def serving_problem(a: Artifacts, hosts: list[str], now: datetime.datetime | None = None) -> str | None:
    """Why the serving certificate of ``a`` must be replaced (its CA assumed good), or None."""
    now = now or _now()
    try:
        ca = x509.load_pem_x509_certificate(a.ca_cert)
        cert = x509.load_pem_x509_certificate(a.cert)
        if not _key_matches(cert, a.key):
            return "the serving key does not match the serving certificate"
        cert.verify_directly_issued_by(ca)
    except InvalidSignature:
        return "the serving certificate is not signed by the CA"
    except (ValueError, TypeError) as err:
        return f"the serving certificate does not parse or chain: {err}"
    if cert.not_valid_before_utc > now + _BACKDATE:
        return f"the serving certificate is not valid before {cert.not_valid_before_utc.isoformat()}"
    if cert.not_valid_after_utc <= now + SERVING_RENEW_BEFORE:
        return f"the serving certificate expires at {cert.not_valid_after_utc.isoformat()}"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "the serving certificate has no subject alternative names"
    dns = {n.lower() for n in san.get_values_for_type(x509.DNSName)}
    ips = set(san.get_values_for_type(x509.IPAddress))
    missing = [h for h in hosts
               if (ipaddress.ip_address(h) not in ips if _is_ip(h) else h.lower() not in dns)]
    if missing:
        return f"the serving certificate does not cover {', '.join(missing)}"
    return None


# -- the manager ----------------------------------------------------------------------------


class CertManager:
    """Keeps the webhook certificates valid: :meth:`ensure` once, :meth:`run` (or start/stop) to keep at it.

    ``serving_validity`` / ``ca_validity`` set the lifetime of newly generated certificates (tests
    make short-lived ones with them). :meth:`run` re-ensures every ``resync_period`` seconds and
    soon after the Secret or a webhook configuration changes.
    """

    def __init__(self, client: Any, config: CertConfig | None = None, *, resync_period: float = RESYNC_PERIOD,
                 serving_validity: datetime.timedelta = SERVING_VALIDITY,
                 ca_validity: datetime.timedelta = CA_VALIDITY) -> None:
        self.client = client
        self.config = config or CertConfig.from_env()
        self.resync_period = resync_period
        self.serving_validity = serving_validity
        self.ca_validity = ca_validity
        self.artifacts: Artifacts | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ca_bundle(self) -> str | None:
        """base64 of the CA PEM, as ``caBundle`` holds it (None before the first :meth:`ensure`)."""
        return base64.b64encode(self.artifacts.ca_cert).decode("ascii") if self.artifacts else None

    # -- one pass ------------------------------------------------------------------------

    def ensure(self) -> None:
        """Make the Secret, the files and every ``caBundle`` right; raises CertError after retries."""
        with self._lock:
            artifacts = self._retry("write the certificate Secret", self._ensure_secret)
            self.artifacts = artifacts
            self._write_files(artifacts)
            bundle = base64.b64encode(artifacts.ca_cert).decode("ascii")
            for kind, name in (("MutatingWebhookConfiguration", self.config.mutating_webhook_name),
                               ("ValidatingWebhookConfiguration", self.config.validating_webhook_name)):
                self._retry(f"patch caBundle of {kind} {name}",
                            lambda k=kind, n=name: self._patch_bundle(k, n, bundle))

    def _retry(self, what: str, fn: Any) -> Any:
        """Run ``fn`` again on conflicts (re-read inside) and transient failures, then give up clearly."""
        delay, last = 0.1, None
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                return fn()
            except (errors.Conflict, errors.AlreadyExists) as err:
                last = err
                log.debug("%s: %s (attempt %d), re-reading", what, err, attempt)
                continue
            except (errors.ConnectionFailed, errors.InternalError, errors.ServiceUnavailable, errors.Timeout,
                    errors.TooManyRequests) as err:
                last = err
                log.debug("%s: %s (attempt %d)", what, err, attempt)
            except errors.ApiError as err:
                # Forbidden (RBAC), Invalid (an immutable Secret), a missing namespace: retrying will not help.
                raise CertError(f"webhook certificates: cannot {what}: {err}") from err
            if attempt < _ATTEMPTS:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise CertError(f"webhook certificates: cannot {what} after {_ATTEMPTS} attempts: {last}") from last

    def _ensure_secret(self) -> Artifacts:
        ns, name = self.config.namespace, self.config.secret_name
        hosts = self.config.hosts()
        try:
            secret: dict | None = self.client.get("Secret", name, ns)
        except errors.NotFound:
            secret = None
        current = Artifacts.from_secret(secret) if secret is not None else None
        if current is None:
            ca_reason: str | None = "no Secret" if secret is None else "the Secret lacks certificate keys"
            serving_reason = ca_reason
        else:
            ca_reason = ca_problem(current)
            serving_reason = ca_reason or serving_problem(current, hosts)
            if serving_reason is None:
                return current
        if current is not None and ca_reason is None:
            ca_cert, ca_key = current.ca_cert, current.ca_key
        else:
            ca_cert, ca_key = generate_ca(self.ca_validity)
        cert, key = generate_serving(ca_cert, ca_key, hosts, validity=self.serving_validity,
                                     common_name=self.config.common_name)
        fresh = Artifacts(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key)
        if secret is None:
            # AlreadyExists: another replica won the race; _retry re-reads and adopts its certificates.
            self.client.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                "metadata": {"name": name, "namespace": ns}, "data": fresh.secret_data()})
            action = "created"
        else:
            updated = dict(secret)
            updated["data"] = {**(secret.get("data") or {}), **fresh.secret_data()}
            # The read resourceVersion travels with the update: a concurrent writer makes it Conflict.
            self.client.update(updated)
            action = "updated"
        log.info("generated new webhook certificate secret=%s/%s action=%s reason=%s new_ca=%s hosts=%s",
                 ns, name, action, serving_reason, ca_reason is not None, ",".join(hosts))
        return fresh

    def _write_files(self, a: Artifacts) -> None:
        directory = self.config.cert_dir
        os.makedirs(directory, exist_ok=True)
        # The key before the certificate: the server reloads once the pair matches again.
        changed = [name for name, data, mode in ((KEY_FILE, a.key, 0o600), (CERT_FILE, a.cert, 0o644),
                                                 (CA_FILE, a.ca_cert, 0o644))
                   if _write_if_changed(os.path.join(directory, name), data, mode)]
        if changed:
            log.info("wrote webhook certificate files dir=%s files=%s", directory, ",".join(changed))

    def _patch_bundle(self, kind: str, name: str, bundle: str) -> None:
        try:
            obj = self.client.get(kind, name)
        except errors.NotFound:
            log.debug("no %s %s: nothing to patch", kind, name)
            return
        webhooks = obj.get("webhooks") or []
        stale = [w.get("name") for w in webhooks if (w.get("clientConfig") or {}).get("caBundle") != bundle]
        if not stale:
            return
        for w in webhooks:
            w.setdefault("clientConfig", {})["caBundle"] = bundle
        # A whole-object update with the read resourceVersion: a concurrent edit makes it Conflict
        # and _retry re-reads, so no other field of the configuration is overwritten.
        self.client.update(obj)
        log.info("patched caBundle kind=%s name=%s webhooks=%s", kind, name, ",".join(map(str, stale)))

    # -- loop ----------------------------------------------------------------------------

    def run(self, stop_event: threading.Event) -> None:
        """Ensure now, then every ``resync_period`` seconds and soon after a watched object changes."""
        from koordinator.runtime.informer import SharedInformer

        cfg = self.config
        informers = [
            SharedInformer(self.client, "Secret", namespace=cfg.namespace,
                           field_selector=f"metadata.name={cfg.secret_name}"),
            SharedInformer(self.client, "MutatingWebhookConfiguration",
                           field_selector=f"metadata.name={cfg.mutating_webhook_name}"),
            SharedInformer(self.client, "ValidatingWebhookConfiguration",
                           field_selector=f"metadata.name={cfg.validating_webhook_name}"),
        ]
        wake = lambda *_: self._wake.set()  # noqa: E731
        for informer in informers:
            informer.add_handler(on_add=wake, on_update=lambda old, new: wake() if _changed(old, new) else None,
                                 on_delete=wake)
            informer.start()
        failures = 0
        try:
            while not stop_event.is_set() and not self._stop.is_set():
                self._wake.clear()
                try:
                    self.ensure()
                    failures = 0
                    wait = self.resync_period
                except Exception as err:
                    failures += 1
                    wait = min(60.0, 0.5 * 2 ** min(failures, 7))
                    log.error("ensuring webhook certificates failed (retrying in %.0fs): %s", wait, err)
                deadline = time.monotonic() + wait
                while not stop_event.is_set() and not self._stop.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0 or self._wake.wait(min(left, 0.25)):
                        break
        finally:
            for informer in informers:
                informer.stop(2.0)

    def start(self) -> None:
        """Run :meth:`run` in a thread of its own (the Component form)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, args=(self._stop,), name="webhook-certs", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True


def _changed(old: dict, new: dict) -> bool:
    return (old.get("metadata") or {}).get("resourceVersion") != (new.get("metadata") or {}).get("resourceVersion")


def _write_if_changed(path: str, data: bytes, mode: int) -> bool:
    """Write ``data`` to ``path`` via a temporary file and rename, unless it already holds it; True if written."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except OSError:
        pass
    write_atomic(path, data, mode, sync=True)
    return True
