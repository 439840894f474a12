"""Unknown fields of built-in kinds are dropped at every depth, as kube-apiserver's typed decoder does,
and no field the API has is dropped (the field tables are generated from the kubernetes client's models)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import subprocess
import sys
from pathlib import Path

import pytest

from koordinator.apiserver import builtin_field_tables, builtin_fields
from koordinator.apiserver.resources import Registry
from tests.apiserver_process import ApiServerProcess

REPO = Path(__file__).resolve().parent.parent

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
SERVICES = "/api/v1/namespaces/default/services"
PODS = "/api/v1/namespaces/default/pods"


def test_the_field_tables_are_generated_from_the_pinned_client():
    """The committed tables are what scripts/gen_builtin_fields.py makes of the installed kubernetes client."""
    proc = subprocess.run([sys.executable, "scripts/gen_builtin_fields.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_every_built_in_kind_the_server_serves_is_covered():
    served = {(rt.api_version, rt.kind) for rt in Registry().all() if rt.builtin}
    assert served <= set(builtin_field_tables.KINDS)

    def well_formed(code: str) -> bool:
        if code[:1] in ("[", "{"):
            return code[-1] == {"[": "]", "{": "}"}[code[0]] and well_formed(code[1:-1])
        return code in ("", "s", "i", "b", "f", "t", "y") or code in builtin_field_tables.MODELS

    for model in builtin_field_tables.MODELS.values():
        for code in model.values():
            assert well_formed(code), code


def type_error(api_version: str, kind: str, obj: dict) -> str | None:
    try:
        builtin_fields.decode(api_version, kind, copy.deepcopy(obj))
    except builtin_fields.TypeMismatch as err:
        return str(err)
    return None


def test_type_errors_are_worded_as_gos_decoder_words_them():
    assert type_error("rbac.authorization.k8s.io/v1", "Role", {"rules": "x"}) == \
        "json: cannot unmarshal string into Go struct field Role.rules of type []v1.PolicyRule"
    assert type_error("rbac.authorization.k8s.io/v1", "Role", {"rules": [{"verbs": 5}]}) == \
        "json: cannot unmarshal number into Go struct field PolicyRule.rules.verbs of type []string"
    pod = {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}}
    assert type_error("v1", "Pod", pod) == ("json: cannot unmarshal string into Go struct field "
                                            "ContainerPort.spec.containers.ports.containerPort of type integer")
    # Quantities may be numbers; IntOrString takes either; null is the zero value.
    ok = {"spec": {"replicas": None, "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                   "template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": 1}}}]}}}}
    assert type_error("apps/v1", "Deployment", ok) is None


def test_prune_names_paths_as_kube_does():
    deployment = {"spec": {"replicas": 1, "bogus": 1, "template": {
        "metadata": {"labels": {"a": "b"}, "colour": "red"},
        "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d", "image": "i", "imagePullPolicyx": "x",
                                                             "resources": {"limits": {"cpu": "1"}, "max": 1}}],
                 "volumes": [{"name": "v", "awsElasticBlockStore": {"volumeID": "vol", "anything": 1}}]}}},
        "status": {"replicas": 0}}
    unknown = builtin_fields.decode("apps/v1", "Deployment", deployment)
    assert unknown == ["spec.bogus", "spec.template.metadata.colour",
                       "spec.template.spec.containers[1].imagePullPolicyx",
                       "spec.template.spec.containers[1].resources.max",
                       "spec.template.spec.volumes[0].awsElasticBlockStore.anything"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert containers[1] == {"name": "d", "image": "i", "resources": {"limits": {"cpu": "1"}}}
    assert "anything" not in deployment["spec"]["template"]["spec"]["volumes"][0]["awsElasticBlockStore"]


def test_a_wrongly_typed_value_is_found_before_an_unknown_field_after_it_counts():
    pod = {"spec": {"containers": "not-a-list", "bogus": 1, "affinity": ["not", "an", "object"]}}
    assert type_error("v1", "Pod", pod) == \
        "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    proc = ApiServerProcess(tmp_path_factory.mktemp("builtin-fields")).start()
    try:
        yield proc
    finally:
        proc.stop()


def deployment(name: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def test_strict_create_names_a_nested_unknown_field_and_stores_nothing(server):
    doc = deployment("strict")
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyx"] = "Always"
    status, body, _ = server.request("POST", f"{DEPLOYMENTS}?fieldValidation=Strict", doc)
    assert status == 400, body
    assert body["message"] == ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
                               'unknown field "spec.template.spec.containers[0].imagePullPolicyx"')
    server.request("GET", f"{DEPLOYMENTS}/strict", expect=404)


def test_warn_create_drops_the_nested_field_with_a_warning(server):
    doc = deployment("warn")
    doc["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyx"] = "Always"
    _, made, headers = server.request("POST", DEPLOYMENTS, doc, expect=201)
    assert headers["warning"] == '299 - "unknown field \\"spec.template.spec.containers[0].imagePullPolicyx\\""'
    assert "imagePullPolicyx" not in json.dumps(made)


def test_a_merge_patch_adding_a_nested_unknown_field_changes_nothing(server):
    server.request("POST", SERVICES, {"metadata": {"name": "svc"},
                                      "spec": {"ports": [{"port": 80}], "selector": {"app": "a"}}}, expect=201)
    _, before, _ = server.request("GET", f"{SERVICES}/svc", expect=200)
    _, after, headers = server.request("PATCH", f"{SERVICES}/svc", {"spec": {"replicas": 3}},
                                       headers={"Content-Type": "application/merge-patch+json"}, expect=200)
    assert "spec.replicas" in headers.get("warning", "")
    assert after == before  # a no-op: not even the resourceVersion moves
    status, body, _ = server.request("PATCH", f"{SERVICES}/svc?fieldValidation=Strict", {"spec": {"replicas": 3}},
                                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 400 and 'unknown field "spec.replicas"' in body["message"], body
    assert server.request("GET", f"{SERVICES}/svc", expect=200)[1] == before


def test_fields_the_protobuf_tables_lack_are_stored(server):
    pod = {"metadata": {"name": "legacy-volume"},
           "spec": {"containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "v", "awsElasticBlockStore": {"volumeID": "vol-1", "fsType": "ext4"}}]}}
    _, made, headers = server.request("POST", f"{PODS}?fieldValidation=Strict", pod, expect=201)
    assert made["spec"]["volumes"][0]["awsElasticBlockStore"] == {"volumeID": "vol-1", "fsType": "ext4"}
    assert "warning" not in headers


def test_kinds_without_protobuf_tables_are_pruned_too(server):
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"},
               "spec": {"rules": [{"host": "a.example", "colour": "red", "http": {"paths": [
                   {"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}]}}
    status, body, _ = server.request("POST", "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
                                     "?fieldValidation=Strict", ingress)
    assert status == 400 and 'unknown field "spec.rules[0].colour"' in body["message"], body
    _, made, _ = server.request("POST", "/apis/networking.k8s.io/v1/namespaces/default/ingresses", ingress,
                                expect=201)
    assert made["spec"]["rules"][0] == {k: v for k, v in ingress["spec"]["rules"][0].items() if k != "colour"}
