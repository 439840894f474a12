"""Discovery, health and version endpoints, checked over HTTP and with kubectl."""

from kubernetes import client


def test_health_endpoints(apiserver):
    for path in ("/healthz", "/livez", "/readyz", "/readyz/ping"):
        status, body, headers = apiserver.request("GET", path)
        assert status == 200 and body == "ok"


def test_version_and_legacy_discovery(apiserver):
    _, version, _ = apiserver.request("GET", "/version", expect=200)
    assert version["major"] == "1" and version["gitVersion"].startswith("v1.")
    _, api, _ = apiserver.request("GET", "/api", expect=200)
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    _, core, _ = apiserver.request("GET", "/api/v1", expect=200)
    names = {r["name"]: r for r in core["resources"]}
    for expected in ("pods", "pods/status", "pods/binding", "pods/eviction", "nodes", "nodes/status", "namespaces",
                     "configmaps", "secrets", "services", "events", "serviceaccounts"):
        assert expected in names, expected
    assert names["pods/eviction"]["group"] == "policy" and names["pods/eviction"]["kind"] == "Eviction"
    assert names["pods/binding"]["verbs"] == ["create"]
    assert names["pods"]["shortNames"] == ["po"] and names["pods"]["namespaced"] is True
    assert names["nodes"]["namespaced"] is False


def test_group_discovery(apiserver):
    _, groups, _ = apiserver.request("GET", "/apis", expect=200)
    served = {g["name"]: g for g in groups["groups"]}
    for group in ("coordination.k8s.io", "policy", "apps", "apiextensions.k8s.io", "admissionregistration.k8s.io",
                  "scheduling.k8s.io", "rbac.authorization.k8s.io", "batch"):
        assert served[group]["preferredVersion"]["version"] == "v1"
    _, leases, _ = apiserver.request("GET", "/apis/coordination.k8s.io/v1", expect=200)
    assert [r["name"] for r in leases["resources"]] == ["leases"]
    _, group, _ = apiserver.request("GET", "/apis/policy", expect=200)
    assert group["kind"] == "APIGroup"


def test_unknown_paths_are_404_status(apiserver):
    for path in ("/apis/example.com/v1", "/api/v1/widgets", "/apis/apps/v1/namespaces/default/cronjobs",
                 "/nonsense", "/api/v2"):
        status, body, _ = apiserver.request("GET", path)
        assert status == 404, path
        assert body["kind"] == "Status" and body["reason"] == "NotFound"


def test_python_client_discovery(api_client):
    versions = client.CoreApi(api_client).get_api_versions()
    assert versions.versions == ["v1"]
    groups = client.ApisApi(api_client).get_api_versions()
    assert "apps" in {g.name for g in groups.groups}


def test_kubectl_api_resources_and_version(apiserver):
    out = apiserver.kubectl("api-resources").stdout
    for line in ("pods", "leases", "poddisruptionbudgets", "customresourcedefinitions", "priorityclasses"):
        assert line in out
    assert "Server Version: v1.32" in apiserver.kubectl("version").stdout
