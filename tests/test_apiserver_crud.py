"""Create/read/update/delete semantics, through the official Python client and raw HTTP."""

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


def cm(name, data=None, **meta):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data or {"k": "v"}}


def test_create_sets_server_fields(core, namespace):
    created = core.create_namespaced_config_map(namespace, cm("one"))
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert int(created.metadata.resource_version) > 0
    got = core.read_namespaced_config_map("one", namespace)
    assert got.metadata.resource_version == created.metadata.resource_version
    assert got.data == {"k": "v"}


def test_resource_versions_are_one_global_increasing_counter(core, namespace):
    a = core.create_namespaced_config_map(namespace, cm("a"))
    b = core.create_namespaced_config_map(namespace, cm("b"))
    c = core.patch_namespaced_config_map("a", namespace, {"data": {"x": "y"}})
    assert int(a.metadata.resource_version) < int(b.metadata.resource_version) < int(c.metadata.resource_version)


def test_generate_name(core, namespace):
    made = core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}, "data": {}})
    assert made.metadata.name.startswith("gen-") and len(made.metadata.name) == 9


def test_already_exists_is_409(core, namespace):
    core.create_namespaced_config_map(namespace, cm("dup"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map(namespace, cm("dup"))
    assert err.value.status == 409
    assert '"reason":"AlreadyExists"' in err.value.body.replace(" ", "")
    assert 'configmaps \\"dup\\" already exists' in err.value.body


def test_stale_update_conflicts(apiserver, namespace):
    _, made, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", cm("c"), expect=201)
    stale = dict(made)
    made["data"] = {"k": "new"}
    apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/c", made, expect=200)
    stale["data"] = {"k": "lost"}
    status, body, _ = apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/c", stale)
    assert status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]
    _, current, _ = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/c")
    assert current["data"] == {"k": "new"}


def test_update_without_resource_version_is_unconditional(apiserver, namespace):
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", cm("u"), expect=201)
    _, body, _ = apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/u", cm("u", {"a": "b"}),
                                   expect=200)
    assert body["data"] == {"a": "b"}


def test_noop_update_keeps_resource_version(apiserver, namespace):
    _, made, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", cm("same"), expect=201)
    _, again, _ = apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/same", made, expect=200)
    assert again["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


def test_immutable_metadata_is_kept(apiserver, namespace):
    _, made, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", cm("imm"), expect=201)
    changed = dict(made, metadata={**made["metadata"], "creationTimestamp": "2000-01-01T00:00:00Z"})
    _, body, _ = apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/imm", changed, expect=200)
    assert body["metadata"]["creationTimestamp"] == made["metadata"]["creationTimestamp"]
    wrong_uid = dict(made, metadata={**made["metadata"], "uid": "00000000-0000-0000-0000-000000000000"})
    status, err, _ = apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/imm", wrong_uid)
    assert status == 409 and "Precondition failed: UID in precondition" in err["message"]
    status, err, _ = apiserver.request("PUT", f"/api/v1/namespaces/{namespace}/configmaps/imm", cm("other"))
    assert status == 400 and "does not match the name on the URL" in err["message"]


def test_namespace_must_exist(apiserver):
    status, body, _ = apiserver.request("POST", "/api/v1/namespaces/nope-missing/configmaps", cm("x"))
    assert status == 404 and body["message"] == 'namespaces "nope-missing" not found'


def test_cluster_scoped_and_namespaced_paths(apiserver, namespace):
    status, _, _ = apiserver.request("GET", f"/api/v1/namespaces/{namespace}/nodes")
    assert status == 404
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{namespace}", "namespace": "ignored"}}
    _, made, _ = apiserver.request("POST", "/api/v1/nodes", node, expect=201)
    assert "namespace" not in made["metadata"]
    status, _, _ = apiserver.request("POST", "/api/v1/configmaps", cm("x"))
    assert status == 405


def test_create_with_resource_version_is_rejected(apiserver, namespace):
    status, body, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                        cm("rv", resourceVersion="5"))
    assert status == 400 and "resourceVersion should not be set" in body["message"]


def test_wrong_kind_in_body_is_400(apiserver, namespace):
    status, body, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                                        {"apiVersion": "v1", "kind": "pod", "metadata": {"name": "p"}})
    assert status == 400
    assert body["message"].startswith('pod in version "v1" cannot be handled as a Pod: no kind "pod" is registered')


def test_generation_bumps_on_spec_change_only(apiserver, namespace):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    _, made, _ = apiserver.request("POST", base, dep, expect=201)
    assert made["metadata"]["generation"] == 1
    merge = {"Content-Type": "application/merge-patch+json"}
    _, labelled, _ = apiserver.request("PATCH", f"{base}/web", {"metadata": {"labels": {"a": "b"}}}, headers=merge,
                                       expect=200)
    assert labelled["metadata"]["generation"] == 1
    _, scaled, _ = apiserver.request("PATCH", f"{base}/web", {"spec": {"replicas": 3}}, headers=merge, expect=200)
    assert scaled["metadata"]["generation"] == 2
    _, status_written, _ = apiserver.request("PATCH", f"{base}/web/status", {"status": {"replicas": 3}},
                                             headers=merge, expect=200)
    assert status_written["metadata"]["generation"] == 2 and status_written["status"]["replicas"] == 3
    # The main resource ignores status; the status subresource ignores spec.
    _, ignored, _ = apiserver.request("PATCH", f"{base}/web", {"status": {"replicas": 9}}, headers=merge, expect=200)
    assert ignored["status"]["replicas"] == 3
    _, ignored, _ = apiserver.request("PATCH", f"{base}/web/status", {"spec": {"replicas": 9}}, headers=merge,
                                      expect=200)
    assert ignored["spec"]["replicas"] == 3
    _, scale, _ = apiserver.request("GET", f"{base}/web/scale", expect=200)
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 3


def test_finalizers_hold_deletion(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    apiserver.request("POST", path, cm("fin", finalizers=["example.com/hold"]), expect=201)
    status, deleting, _ = apiserver.request("DELETE", f"{path}/fin")
    assert status == 202 and deleting["metadata"]["deletionTimestamp"]
    _, still, _ = apiserver.request("GET", f"{path}/fin", expect=200)
    assert still["metadata"]["deletionTimestamp"] == deleting["metadata"]["deletionTimestamp"]
    status, body, _ = apiserver.request(
        "PATCH", f"{path}/fin", {"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}},
        headers={"Content-Type": "application/merge-patch+json"})
    assert status == 422 and "no new finalizers can be added" in body["message"]
    apiserver.request("PATCH", f"{path}/fin", {"metadata": {"finalizers": None}},
                      headers={"Content-Type": "application/merge-patch+json"}, expect=200)
    apiserver.request("GET", f"{path}/fin", expect=404)


def test_delete_preconditions_and_collection(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    _, made, _ = apiserver.request("POST", path, cm("pre"), expect=201)
    status, body, _ = apiserver.request("DELETE", f"{path}/pre", {"preconditions": {"uid": "wrong"}})
    assert status == 409 and "Precondition failed" in body["message"]
    status, body, _ = apiserver.request("DELETE", f"{path}/pre", {"preconditions": {"resourceVersion": "1"}})
    assert status == 409
    apiserver.request("DELETE", f"{path}/pre", {"preconditions": {"uid": made["metadata"]["uid"]}}, expect=200)
    for i in range(3):
        apiserver.request("POST", path, cm(f"col-{i}", labels={"batch": "x" if i < 2 else "y"}), expect=201)
    _, deleted, _ = apiserver.request("DELETE", f"{path}?labelSelector=batch%3Dx", expect=200)
    assert sorted(i["metadata"]["name"] for i in deleted["items"]) == ["col-0", "col-1"]
    _, left, _ = apiserver.request("GET", path)
    assert [i["metadata"]["name"] for i in left["items"]] == ["col-2"]


def test_delete_missing_is_404(core, namespace):
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_config_map("ghost", namespace)
    assert err.value.status == 404


def test_namespace_deletion_removes_content(apiserver, core):
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", cm("inside"))
    assert core.read_namespaced_service_account("default", "doomed").metadata.name == "default"
    core.delete_namespace("doomed")
    with pytest.raises(ApiException) as err:
        core.read_namespace("doomed")
    assert err.value.status == 404
    status, _, _ = apiserver.request("GET", "/api/v1/namespaces/doomed/configmaps/inside")
    assert status == 404


def test_system_namespaces_exist_and_are_immortal(apiserver):
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        apiserver.request("GET", f"/api/v1/namespaces/{ns}", expect=200)
    status, body, _ = apiserver.request("DELETE", "/api/v1/namespaces/default")
    assert status == 403 and body["reason"] == "Forbidden"


def test_lease_crud_with_python_client(api_client, namespace):
    coord = client.CoordinationV1Api(api_client)
    lease = coord.create_namespaced_lease(namespace, {
        "metadata": {"name": "leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-11-22T10:00:00.000000Z"}})
    lease.spec.holder_identity = "b"
    updated = coord.replace_namespaced_lease("leader", namespace, lease)
    assert updated.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease("leader", namespace, lease)
    assert err.value.status == 409


def test_dry_run_stores_nothing(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    apiserver.request("POST", path + "?dryRun=All", cm("dry"), expect=201)
    apiserver.request("GET", f"{path}/dry", expect=404)


def test_null_metadata_is_an_empty_object_meta(apiserver, namespace):
    status, body, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps",
                                        raw=b"apiVersion: v1\nkind: ConfigMap\nmetadata: null\n",
                                        headers={"Content-Type": "application/yaml"})
    assert status == 422
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.name"]


def test_unknown_metadata_fields_are_named_not_a_crash(apiserver, namespace):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "status": {"x": 1}}}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    status, body, _ = apiserver.request("POST", f"{path}?fieldValidation=Strict", cm)
    assert status == 400 and 'unknown field "metadata.status"' in body["message"]
    _, made, headers = apiserver.request("POST", path, cm, expect=201)
    assert "status" not in made["metadata"] and 'unknown field \\"metadata.status\\"' in headers["warning"]


def test_dry_run_create_ignores_a_resource_version(apiserver, namespace):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "observed", "resourceVersion": "42"}}
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    apiserver.request("POST", f"{path}?dryRun=All", cm, expect=201)
    status, body, _ = apiserver.request("POST", path, cm)
    assert status == 400 and body["message"] == "resourceVersion should not be set on objects to be created"


def test_yaml_bodies_decode_like_go_yaml(apiserver, namespace):
    doc = (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: yamlish}\n"
           b"data: {bus: '0000:47:00.0'}\nbinaryData: {}\n")
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", raw=doc,
                      headers={"Content-Type": "application/yaml"}, expect=201)
    # An unquoted PCI bus ID is a string to go-yaml, not a YAML 1.1 base-60 number.
    quota = (b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bus}\ndata:\n  bus: 0000:47:00.0\n"
             b"  time: 12:30\n")
    _, made, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", raw=quota,
                                   headers={"Content-Type": "application/yaml"}, expect=201)
    assert made["data"] == {"bus": "0000:47:00.0", "time": "12:30"}


def test_kubectl_reports_kinds_the_server_does_not_serve(apiserver, namespace):
    manifest = f"apiVersion: apps/v1\nkind: Pod\nmetadata: {{name: misplaced, namespace: {namespace}}}\n"
    proc = apiserver.kubectl("apply", "--dry-run=server", "-f", "-", input=manifest, check=False)
    assert proc.returncode != 0
    assert 'no matches for kind "Pod" in version "apps/v1"' in proc.stderr
    status, _, headers = apiserver.request("GET", "/openapi/v2")
    assert status == 200 and headers["content-type"].startswith("application/com.github.proto-openapi.spec.v2")
