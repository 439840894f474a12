"""Where the cluster is and how to authenticate: kubeconfig files and the in-cluster service account.

Our own loader for what nearly every kubeconfig holds — server, CA, client certificate, bearer
token or token file, basic auth, ``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url`` —
because importing the ``kubernetes`` package costs every process 0.4 s and 20 MB. Users with
dynamic credentials (``exec`` plugins, ``auth-provider``) are handed to the ``kubernetes``
package's loader, imported only then, which also refreshes their tokens.

Lookup order, as kubectl and client-go: an explicit file; else in-cluster (``$KUBERNETES_SERVICE_HOST``
and the service account token); else ``$KUBECONFIG`` (a ``:``-separated list merged first-wins); else
``~/.kube/config``. Relative paths inside a file are relative to that file.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import os
import ssl
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlparse

import yaml

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: How often a token file (the in-cluster token rotates) is read again.
TOKEN_FILE_REFRESH = 60.0

Obj = dict[str, Any]


class ConfigError(Exception):
    """No usable cluster configuration (kubeconfig missing, malformed, or no in-cluster account)."""


@dataclass
class ClusterConfig:
    """One cluster and credentials, everything the transport and the client need."""

    host: str
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    proxy: str | None = None
    #: Dynamic credentials (exec, auth-provider): returns the current Authorization header value.
    auth_hook: Callable[[], str | None] | None = None
    _token_read: float = field(default=-1e9, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def authorization(self) -> str | None:
        """The ``Authorization`` header value for the next request (None: none)."""
        if self.auth_hook is not None:
            return self.auth_hook()
        if self.token_file:
            now = time.monotonic()
            if now - self._token_read >= TOKEN_FILE_REFRESH:
                with self._lock:
                    try:
                        with open(self.token_file, encoding="utf-8") as f:
                            self.token = f.read().strip()
                    except OSError:
                        pass  # keep the last good token; the server will say if it is no longer valid
                    self._token_read = now
        if self.token:
            return f"Bearer {self.token}"
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        return None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS settings for an ``https`` server (None for ``http``)."""
        if not self.host.startswith("https"):
            return None
        try:
            context = ssl.create_default_context(cafile=self.ca_file or None, cadata=self.ca_data or None)
            if not self.verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self.cert_file:
                context.load_cert_chain(self.cert_file, self.key_file or None)
        except (OSError, ssl.SSLError, ValueError) as err:
            raise ConfigError(f"TLS settings for {self.host}: {err}") from None
        return context


def load(kubeconfig: str | None = None, *, context: str | None = None) -> ClusterConfig:
    """The cluster configuration (see the module docstring for the lookup order)."""
    if kubeconfig:
        if not os.path.exists(kubeconfig):
            raise ConfigError(f"--kubeconfig {kubeconfig}: no such file")
        return _from_files([kubeconfig], context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(os.path.join(SERVICE_ACCOUNT_DIR, "token")):
        return in_cluster()
    env = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    paths = [p for p in env if os.path.exists(p)] if env else [os.path.expanduser("~/.kube/config")]
    if not paths or not os.path.exists(paths[0]):
        where = os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise ConfigError(f"no cluster configuration: {where} does not exist and this is not a pod in a cluster "
                          f"(use --kubeconfig)")
    return _from_files(paths, context)


def in_cluster() -> ClusterConfig:
    """The pod's service account: ``$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, its CA and token."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST", ""), os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
    if ":" in host:
        host = f"[{host}]"
    token_file = os.path.join(SERVICE_ACCOUNT_DIR, "token")
    cfg = ClusterConfig(host=f"https://{host}:{port}", ca_file=os.path.join(SERVICE_ACCOUNT_DIR, "ca.crt"),
                        token_file=token_file)
    if not cfg.authorization():
        raise ConfigError(f"in-cluster configuration: cannot read the service account token {token_file}")
    return _with_env_proxy(cfg)


def _read(path: str) -> Obj:
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
    except OSError as err:
        raise ConfigError(f"kubeconfig {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"kubeconfig {path}: not YAML: {err}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path}: not a Config object")
    return doc


def _named(doc: Obj, section: str, path: str) -> dict[str, tuple[Obj, str]]:
    """``clusters``/``contexts``/``users`` by name -> (the entry's body, the file it came from)."""
    out: dict[str, tuple[Obj, str]] = {}
    for i, entry in enumerate(doc.get(section) or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"kubeconfig {path}: {section}[{i}]: an entry needs a name")
        body = entry.get(section[:-1]) or {}
        if not isinstance(body, dict):
            raise ConfigError(f"kubeconfig {path}: {section}[{entry['name']}]: not an object")
        out[entry["name"]] = (body, path)
    return out


def _from_files(paths: list[str], context: str | None) -> ClusterConfig:
    clusters: dict[str, tuple[Obj, str]] = {}
    contexts: dict[str, tuple[Obj, str]] = {}
    users: dict[str, tuple[Obj, str]] = {}
    current = None
    for path in paths:
        doc = _read(path)
        for table, section in ((clusters, "clusters"), (contexts, "contexts"), (users, "users")):
            for name, value in _named(doc, section, path).items():
                table.setdefault(name, value)  # the first file that names an entry wins
        current = current or doc.get("current-context")
    where = ", ".join(paths)
    name = context or current
    if not name:
        raise ConfigError(f"kubeconfig {where}: no current-context (and no context given)")
    if name not in contexts:
        raise ConfigError(f"kubeconfig {where}: context {name!r} does not exist")
    ctx, _ = contexts[name]
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if cluster_name not in clusters:
        raise ConfigError(f"kubeconfig {where}: contexts[{name}].cluster: cluster {cluster_name!r} does not exist")
    cluster, cluster_file = clusters[cluster_name]
    user, user_file = users.get(user_name, ({}, where)) if user_name else ({}, where)
    if user.get("exec") or user.get("auth-provider"):
        return _dynamic(paths, name)
    server = cluster.get("server")
    if not isinstance(server, str) or urlparse(server).scheme not in ("http", "https"):
        raise ConfigError(f"kubeconfig {cluster_file}: clusters[{cluster_name}].server: {server!r} is not an "
                          f"http(s) URL")
    cfg = ClusterConfig(host=server.rstrip("/"),
                        verify=not cluster.get("insecure-skip-tls-verify", False),
                        tls_server_name=cluster.get("tls-server-name") or None,
                        proxy=cluster.get("proxy-url") or None)
    base = os.path.dirname(os.path.abspath(cluster_file))
    cfg.ca_file = _path(cluster.get("certificate-authority"), base)
    cfg.ca_data = _decoded(cluster, "certificate-authority-data", f"clusters[{cluster_name}]", cluster_file)
    base = os.path.dirname(os.path.abspath(user_file))
    prefix = f"users[{user_name}]"
    cfg.cert_file = _path(user.get("client-certificate"), base) or _data_file(
        _decoded(user, "client-certificate-data", prefix, user_file))
    cfg.key_file = _path(user.get("client-key"), base) or _data_file(
        _decoded(user, "client-key-data", prefix, user_file))
    cfg.token = user.get("token") or None
    cfg.token_file = None if cfg.token else _path(user.get("tokenFile"), base)
    if user.get("username") is not None:
        cfg.username, cfg.password = str(user["username"]), str(user.get("password") or "")
    if cfg.token_file and not cfg.authorization():
        raise ConfigError(f"kubeconfig {user_file}: {prefix}.tokenFile: cannot read {cfg.token_file}")
    return cfg if cfg.proxy else _with_env_proxy(cfg)


def _path(value: Any, base: str) -> str | None:
    if not value:
        return None
    return os.path.join(base, os.path.expanduser(str(value)))


def _decoded(entry: Obj, key: str, prefix: str, path: str) -> str | None:
    raw = entry.get(key)
    if not raw:
        return None
    try:
        return base64.b64decode(str(raw), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ConfigError(f"kubeconfig {path}: {prefix}.{key}: not base64-encoded PEM") from None


_data_dir: str | None = None


def _data_file(pem: str | None) -> str | None:
    """PEM data as a private file (``ssl`` loads client certificates only from files)."""
    global _data_dir
    if pem is None:
        return None
    if _data_dir is None:
        _data_dir = tempfile.mkdtemp(prefix="koordinator-kubeconfig-")
        atexit.register(_remove_data_dir, _data_dir)
    fd, name = tempfile.mkstemp(dir=_data_dir, suffix=".pem")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(pem)
    return name


def _remove_data_dir(directory: str) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)


def _with_env_proxy(cfg: ClusterConfig) -> ClusterConfig:
    """``$HTTPS_PROXY``/``$HTTP_PROXY`` for the server's scheme, unless ``$NO_PROXY`` exempts it."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(urlparse(cfg.host).scheme)
    if proxy and not urllib.request.proxy_bypass_environment(urlparse(cfg.host).hostname or "", proxies):
        cfg.proxy = proxy
    return cfg


def _dynamic(paths: list[str], context: str) -> ClusterConfig:
    """exec / auth-provider users: the ``kubernetes`` package's loader, which refreshes their tokens."""
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException

    conf = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(config_file=paths[0] if len(paths) == 1 else None, context=context,
                                    client_configuration=conf, persist_config=False)
    except ConfigException as err:
        raise ConfigError(f"kubeconfig {', '.join(paths)}: {err}") from None

    def auth() -> str | None:
        setting = conf.auth_settings().get("BearerToken") or {}
        return setting.get("value") or None

    cfg = ClusterConfig(host=conf.host.rstrip("/"), ca_file=conf.ssl_ca_cert or None,
                        cert_file=conf.cert_file or None, key_file=conf.key_file or None,
                        verify=bool(conf.verify_ssl), tls_server_name=getattr(conf, "tls_server_name", None) or None,
                        auth_hook=auth)
    return cfg if conf.proxy is None else _proxied(cfg, conf)


def _proxied(cfg: ClusterConfig, conf: Any) -> ClusterConfig:
    from kubernetes.client.rest import should_bypass_proxies

    if not should_bypass_proxies(cfg.host, conf.no_proxy or ""):
        cfg.proxy = conf.proxy
    return cfg
