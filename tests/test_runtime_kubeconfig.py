"""Loading kubeconfig files and the in-cluster service account."""

from __future__ import annotations

import base64
import sys

import pytest
import yaml

from koordinator.runtime import kubeconfig
from koordinator.runtime.client import Client
from koordinator.runtime.kubeconfig import ConfigError, load


def write(path, clusters=(), users=(), contexts=(), current=None):
    doc = {"apiVersion": "v1", "kind": "Config",
           "clusters": [{"name": n, "cluster": c} for n, c in clusters],
           "users": [{"name": n, "user": u} for n, u in users],
           "contexts": [{"name": n, "context": c} for n, c in contexts]}
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HTTPS_PROXY", "https_proxy",
                "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)


def test_token_ca_file_relative_to_the_kubeconfig_and_current_context(tmp_path):
    (tmp_path / "ca.crt").write_text("PEM")
    path = write(tmp_path / "config",
                 clusters=[("c", {"server": "https://k8s.example:6443/", "certificate-authority": "ca.crt",
                                  "tls-server-name": "api.internal"})],
                 users=[("u", {"token": "abc"})], contexts=[("ctx", {"cluster": "c", "user": "u"})], current="ctx")
    cfg = load(str(path))
    assert (cfg.host, cfg.ca_file, cfg.tls_server_name) == ("https://k8s.example:6443", str(tmp_path / "ca.crt"),
                                                           "api.internal")
    assert cfg.authorization() == "Bearer abc"


def test_data_fields_token_file_basic_auth_and_context_choice(tmp_path):
    (tmp_path / "token").write_text("from-file\n")
    cert = base64.b64encode(b"CERT").decode()
    path = write(tmp_path / "config",
                 clusters=[("c", {"server": "http://127.0.0.1:1", "certificate-authority-data":
                                  base64.b64encode(b"CA PEM").decode(), "insecure-skip-tls-verify": True})],
                 users=[("tf", {"tokenFile": "token", "client-certificate-data": cert}),
                        ("basic", {"username": "admin", "password": "s3cret"})],
                 contexts=[("a", {"cluster": "c", "user": "tf"}), ("b", {"cluster": "c", "user": "basic"})],
                 current="a")
    cfg = load(str(path))
    assert (cfg.ca_data, cfg.verify) == ("CA PEM", False)
    assert open(cfg.cert_file).read() == "CERT"
    assert cfg.authorization() == "Bearer from-file"
    assert load(str(path), context="b").authorization() == "Basic " + base64.b64encode(b"admin:s3cret").decode()


def test_kubeconfig_list_merges_first_wins(tmp_path, monkeypatch):
    first = write(tmp_path / "one", clusters=[("c", {"server": "http://first:1"})], users=[("u", {"token": "1"})],
                  contexts=[("x", {"cluster": "c", "user": "u"})], current="x")
    second = write(tmp_path / "two", clusters=[("c", {"server": "http://second:1"}), ("d", {"server": "http://d:1"})],
                   contexts=[("y", {"cluster": "d", "user": "u"})], current="y")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'absent'}:{second}")
    assert load().host == "http://first:1"
    assert load(context="y").host == "http://d:1"


@pytest.mark.parametrize("doc, message", [
    ("[1, 2]", "not a Config object"),
    ("clusters: [{cluster: {}}]", r"clusters\[0\]: an entry needs a name"),
    ("contexts: [{name: x, context: {cluster: nope}}]\ncurrent-context: x", "cluster 'nope' does not exist"),
    ("current-context: missing", "context 'missing' does not exist"),
    ("clusters: [{name: c, cluster: {server: 'k8s:6443'}}]\ncontexts: [{name: x, context: {cluster: c}}]\n"
     "current-context: x", r"clusters\[c\].server: 'k8s:6443' is not an http\(s\) URL"),
    ("clusters: [{name: c, cluster: {server: 'https://k', certificate-authority-data: '%%%'}}]\n"
     "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x",
     r"clusters\[c\].certificate-authority-data: not base64"),
    ("clusters: [{name: c, cluster: {server: 'https://k'}}]\nusers: [{name: u, user: {tokenFile: /nope}}]\n"
     "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x",
     r"users\[u\].tokenFile: cannot read /nope"),
    ("a: [", "not YAML"),
])
def test_bad_kubeconfigs_name_the_file_and_field(tmp_path, doc, message):
    path = tmp_path / "config"
    path.write_text(doc)
    with pytest.raises(ConfigError, match=message) as err:
        load(str(path))
    assert str(path) in str(err.value)


def test_nothing_configured(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="~/.kube/config does not exist and this is not a pod"):
        load()
    with pytest.raises(ConfigError, match="no such file"):
        load(str(tmp_path / "missing"))


def test_in_cluster_service_account_and_token_rotation(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("t1")
    (tmp_path / "ca.crt").write_text("PEM")
    monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = load()
    assert (cfg.host, cfg.ca_file, cfg.authorization()) == ("https://[fd00::1]:443", str(tmp_path / "ca.crt"),
                                                            "Bearer t1")
    (tmp_path / "token").write_text("t2")
    assert cfg.authorization() == "Bearer t1", "read again only after the refresh period"
    cfg._token_read -= kubeconfig.TOKEN_FILE_REFRESH
    assert cfg.authorization() == "Bearer t2"


def test_environment_proxy_and_no_proxy(tmp_path, monkeypatch):
    path = write(tmp_path / "config", clusters=[("c", {"server": "https://k8s.example:6443"}),
                                                ("p", {"server": "https://k8s.example:6443",
                                                       "proxy-url": "http://own:3128"})],
                 contexts=[("x", {"cluster": "c"}), ("y", {"cluster": "p"})], current="x")
    monkeypatch.setenv("HTTPS_PROXY", "http://corp:8080")
    assert load(str(path)).proxy == "http://corp:8080"
    assert load(str(path), context="y").proxy == "http://own:3128", "the kubeconfig's proxy-url wins"
    monkeypatch.setenv("NO_PROXY", ".example")
    assert load(str(path)).proxy is None


def test_exec_credential_plugin_authenticates_against_a_tls_server(tls_apiserver, tmp_path):
    generated = yaml.safe_load(tls_apiserver.kubeconfig.read_text())
    token = generated["users"][0]["user"]["token"]
    plugin = tmp_path / "plugin.py"
    plugin.write_text("import json\nprint(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', "
                      "'kind': 'ExecCredential', 'status': {'token': %r}}))\n" % token)
    generated["users"][0]["user"] = {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                              "command": sys.executable, "args": [str(plugin)],
                                              "interactiveMode": "Never"}}
    path = tmp_path / "exec-config"
    path.write_text(yaml.safe_dump(generated))
    cfg = load(str(path))
    assert cfg.auth_hook is not None
    c = Client(cfg, qps=0)
    try:
        assert c.get("Namespace", "default")["metadata"]["name"] == "default"
    finally:
        c.close()
