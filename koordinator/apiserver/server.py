"""The embedded API server process: listener, authentication, TLS, CRD preloading, kubeconfig."""

from __future__ import annotations

import asyncio
import base64
import csv
import glob
import ipaddress
import logging
import os
import secrets
import signal
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

import yaml

from koordinator.apiserver import authorization, errors, impersonation, rbac_bootstrap
from koordinator.apiserver.app import ANONYMOUS, ApiServer
from koordinator.apiserver.authentication import DEFAULT_ISSUER, Authenticator, StaticTokens
from koordinator.apiserver.http import HttpConnection, HttpServer, Request, Response
from koordinator.apiserver.rbac_escalation import EscalationCheck
from koordinator.apiserver.objects import load_yaml_documents
from koordinator.apiserver.options import Options
from koordinator.apiserver.store import Store

log = logging.getLogger("koordinator.apiserver")

# Reachable without a token, as kube-apiserver lets anonymous clients read these.
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")


@dataclass
class ServerConfig:
    """Settings of ``koordinator apiserver`` (each one a flag)."""

    data_dir: str
    host: str = "127.0.0.1"
    port: int = 6443
    token_file: str | None = None
    tls: bool = False
    crd_dirs: list[str] = field(default_factory=list)
    kubeconfig_out: str | None = None
    history_size: int = 50_000
    pod_deletion: str = "immediate"
    bookmark_interval: float = 60.0
    max_body: int = 3 * 1024 * 1024
    synchronous: str = "FULL"
    # "AlwaysAllow" or "RBAC"; None: RBAC when there is a token file, else AlwaysAllow.
    authorization_mode: str | None = None
    service_account_issuer: str = DEFAULT_ISSUER


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_tokens(path: str) -> set[str]:
    """Bearer tokens, one per line (a kube-apiserver token CSV's first column is accepted too)."""
    tokens = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                tokens.add(line.split(",")[0].strip())
    if not tokens:
        raise ValueError(f"--token-file {path}: no token in the file")
    return tokens


def read_token_users(path: str) -> dict[str, dict[str, Any]]:
    """token -> AdmissionReview userInfo: a token CSV's user, uid and groups columns, else an admin."""
    users: dict[str, dict[str, Any]] = {}
    with open(path, encoding="utf-8") as f:
        for row in csv.reader(line for line in f if line.strip() and not line.lstrip().startswith("#")):
            cells = [c.strip() for c in row]
            if not cells or not cells[0]:
                continue
            if len(cells) >= 2 and cells[1]:
                user: dict[str, Any] = {"username": cells[1]}
                if len(cells) >= 3 and cells[2]:
                    user["uid"] = cells[2]
                groups = [g.strip() for g in cells[3].split(",") if g.strip()] if len(cells) >= 4 else []
                user["groups"] = groups + ["system:authenticated"]
            else:
                # A bare token is the cluster admin's credential.
                user = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
            users[cells[0]] = user
    return users


def ensure_token_file(path: str) -> str:
    if not os.path.exists(path):
        with open(path, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(secrets.token_urlsafe(32) + "\n")
    return path


# The lock of a data directory: a file that stays beside state.db, flock()ed by its user.
LOCK_FILE = "lock"
# Set by `koordinator local` for its API server child: the number of an inherited descriptor of the
# data dir's lock file that local already holds the lock through (flock locks belong to the open file,
# so the child holds it too, and keeps holding it should local itself be killed).
LOCK_FD_ENV = "KOORDINATOR_DATA_DIR_LOCK_FD"


class DataDirInUse(Exception):
    """Another live process holds the data directory's lock; the message names the directory and pid."""


class DataDirLock:
    """An exclusive ``flock`` on ``DIR/lock``: one process tree at a time opens a data dir's state.db.

    The kernel drops the lock when its last holder exits, however it exits, so a stale lock of a dead
    process never blocks; the file's content (the holders' pids, one a line) is only for the message.
    """

    def __init__(self, data_dir: str) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.path = os.path.join(self.data_dir, LOCK_FILE)
        self.fd: int | None = None

    def acquire(self, inherited_fd: int | None = None) -> DataDirLock:
        """Take the lock (through ``inherited_fd`` when it is an open descriptor of this very lock file);
        raises :class:`DataDirInUse` at once when another process holds it."""
        import fcntl

        os.makedirs(self.data_dir, exist_ok=True)
        if inherited_fd is not None and self._is_our_file(inherited_fd):
            fd, inherited = inherited_fd, True
        else:
            fd, inherited = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644), False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            raise DataDirInUse(f"data dir {self.data_dir} is in use by pid {holder}") from None
        except OSError:
            os.close(fd)
            raise
        if inherited:
            os.set_inheritable(fd, False)
            # Beside the parent's pid: a second user is told of whichever holder is still alive.
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, f"{os.getpid()}\n".encode())
        else:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def _is_our_file(self, fd: int) -> bool:
        try:
            held, ours = os.fstat(fd), os.stat(self.path)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (ours.st_dev, ours.st_ino)

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            pids = [int(p) for p in os.pread(fd, 4096, 0).split() if p.isdigit()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                return str(pid)
            except ProcessLookupError:
                continue
            except PermissionError:
                return str(pid)
        return str(pids[0]) if pids else "unknown"

    def release(self) -> None:
        """Drop the lock (closing the descriptor; a child that inherited it keeps holding it)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def inherited_lock_fd() -> int | None:
    """The lock descriptor ``koordinator local`` handed down (``$KOORDINATOR_DATA_DIR_LOCK_FD``), if any."""
    raw = os.environ.get(LOCK_FD_ENV, "")
    return int(raw) if raw.isdigit() else None


class EmbeddedApiServer:
    """Runs the API on an asyncio loop, in the foreground (``run``) or a background thread."""

    def __init__(self, config: ServerConfig) -> None:
        if not is_loopback(config.host) and not config.token_file:
            raise ValueError(f"--host {config.host}: binding to a non-loopback address requires --token-file")
        self.config = config
        os.makedirs(config.data_dir, exist_ok=True)
        if config.token_file:
            # Clients (client-go, kubectl) send bearer tokens only over HTTPS.
            config.tls = True
        elif config.tls:
            # An HTTPS server is meant to be reached from elsewhere, and kubectl insists on credentials
            # for https: generate a token once and keep it beside the database.
            config.token_file = ensure_token_file(os.path.join(config.data_dir, "token"))
        self.tokens = read_tokens(config.token_file) if config.token_file else None
        self.token_users = read_token_users(config.token_file) if config.token_file else {}
        self.store = Store(os.path.join(config.data_dir, "state.db"), history_size=config.history_size,
                           synchronous=config.synchronous)
        self.api = ApiServer(self.store, Options(pod_deletion=config.pod_deletion,
                                                 bookmark_interval=config.bookmark_interval))
        self.api.service_account_tokens.issuer = config.service_account_issuer
        # Static tokens, then ServiceAccount tokens; used only with a token file (else the server is open).
        self.authenticator = Authenticator(StaticTokens(self.tokens or set(), self.token_users),
                                           self.api.service_account_tokens)
        # TokenReviews check tokens with the chain requests are authenticated by.
        self.api.authenticator = self.authenticator
        mode = config.authorization_mode or ("RBAC" if config.token_file else "AlwaysAllow")
        self.authorizer = authorization.new_authorizer(mode, self.store)
        self.api.authorizer = self.authorizer
        if mode == "RBAC":
            authorizer = self.authorizer
            self.api.escalation = EscalationCheck(authorizer.rules_for, lambda a: authorizer.authorize(a).allowed,
                                                  authorizer.role_ref_rules)
            rbac_bootstrap.ensure_policy(self.api)
        self.http = HttpServer(self._handle, max_body=config.max_body)
        self.port = 0
        self.ca_file: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = asyncio.Event()
        for directory in config.crd_dirs:
            self.load_crds(directory)

    @property
    def url(self) -> str:
        scheme = "https" if self.config.tls else "http"
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.port}"

    def load_crds(self, directory: str) -> int:
        """Create or update the CRDs defined in ``directory``'s YAML files; returns how many."""
        rt = self.api.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        count = 0
        paths = sorted(glob.glob(os.path.join(directory, "*.yaml")) + glob.glob(os.path.join(directory, "*.yml")))
        if not os.path.isdir(directory):
            raise ValueError(f"--crd-dir {directory}: not a directory")
        for path in paths:
            with open(path, "rb") as f:
                docs = load_yaml_documents(f.read())
            for doc in docs:
                if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                    continue
                name = (doc.get("metadata") or {}).get("name", "")
                try:
                    if self.store.get(rt.storage_key, name) is None:
                        self.api.create_object(rt, None, doc)
                    else:
                        self.api.update_object(rt, name, name, doc, None, {}, check_rv=False)
                except errors.StatusError as err:
                    raise ValueError(f"{path}: {err.message}") from None
                count += 1
        self.store.commit()
        return count

    def _handle(self, req: Request, conn: HttpConnection) -> None:
        user = None
        if self.tokens is not None and not self._public_read(req):
            user = self.authenticator.authenticate(req.header("authorization"))
            if user is None:
                conn.respond(Response.error(errors.unauthorized()))
                return
        allowed, user = self._authorized(req, conn, user)
        if not allowed:
            return
        self.api.handle(req, conn, user)

    def _authorized(self, req: Request, conn: HttpConnection,
                    user: dict[str, Any] | None) -> tuple[bool, dict[str, Any] | None]:
        """Whether the authorizer lets ``user`` make ``req``, and the user it acts as (Impersonate-User);
        a refusal is answered here (403)."""
        if user is None and self._public_read(req):
            return True, None  # reachable without credentials, as before authorization existed
        try:
            if impersonation.requested(req.headers):
                user = impersonation.impersonate(self.authorizer, req, user or ANONYMOUS)
        except errors.StatusError as err:
            conn.respond(Response.error(err))
            return False, None
        if isinstance(self.authorizer, authorization.AlwaysAllow):
            return True, user
        acting = user or ANONYMOUS
        attrs = authorization.request_attributes(req.method, req.path, req.query, acting.get("username", ""),
                                                 acting.get("groups") or ())
        decision = self.authorizer.authorize(attrs)
        if not decision.allowed:
            conn.respond(Response.error(authorization.forbidden(attrs, decision.reason)))
        return decision.allowed, user

    @staticmethod
    def _public_read(req: Request) -> bool:
        """A read of the health and version endpoints, which needs no credentials (a write does)."""
        return req.method in ("GET", "HEAD") and req.path.startswith(PUBLIC_PATHS)

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.config.tls:
            return None
        from koordinator.apiserver.tls import ensure_self_signed

        cert, key = ensure_self_signed(self.config.data_dir, [self.config.host])
        self.ca_file = cert
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        return ctx

    async def start(self) -> str:
        self._loop = asyncio.get_running_loop()
        self.api.loop = self._loop
        self._stopped = asyncio.Event()
        self.port = await self.http.start(self.config.host, self.config.port, self._ssl_context())
        self.api.options.server_address = f"{self.config.host}:{self.port}"
        if self.config.kubeconfig_out:
            self.write_kubeconfig(self.config.kubeconfig_out)
        log.info("serving", extra={"url": self.url})
        return self.url

    async def stop(self) -> None:
        await self.http.stop()
        self.api.webhooks.close()
        self.store.close()
        self._stopped.set()

    def write_kubeconfig(self, path: str, namespace: str | None = None) -> str:
        cluster: dict[str, Any] = {"server": self.url}
        if self.ca_file:
            with open(self.ca_file, "rb") as f:
                cluster["certificate-authority-data"] = base64.b64encode(f.read()).decode()
        user: dict[str, Any] = {}
        if self.tokens:
            # An admin's token (a bare one is system:masters): under RBAC another user's may grant little.
            admins = sorted(t for t in self.tokens
                            if authorization.MASTERS in (self.token_users.get(t) or {}).get("groups", ()))
            user["token"] = (admins or sorted(self.tokens))[0]
        context: dict[str, Any] = {"cluster": "koordinator", "user": "koordinator"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "koordinator", "cluster": cluster}],
            "users": [{"name": "koordinator", "user": user}],
            "contexts": [{"name": "koordinator", "context": context}],
            "current-context": "koordinator",
        }
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), 0o600)
            yaml.safe_dump(config, f, sort_keys=False)
        os.replace(tmp, path)
        return path

    def run(self, on_ready=None) -> None:
        """Serve in the foreground until SIGINT/SIGTERM."""

        async def main() -> None:
            url = await self.start()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self._stopped.set)
            if on_ready is not None:
                on_ready(url)
            await self._stopped.wait()
            await self.stop()

        asyncio.run(main())

    def start_in_thread(self) -> str:
        """Serve on a background thread (for tools and benchmarks in one process); returns the URL."""
        ready = threading.Event()

        def target() -> None:
            async def main() -> None:
                await self.start()
                ready.set()
                await self._stopped.wait()

            asyncio.run(main())

        self._thread = threading.Thread(target=target, name="apiserver", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("the API server did not start within 30 s")
        return self.url

    def stop_thread(self) -> None:
        if self._loop is None or self._thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self.stop(), self._loop)
        fut.result(30)
        self._thread.join(30)
