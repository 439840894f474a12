"""The CRD schemas in schemas/crds: accepted by the API server, generated manifests in step, object corpus.

The corpus under tests/data/crd-objects is checked twice, by ``koordinator.apis.schemas.validate_object``
and by the embedded API server serving the generated CRDs (``--crd-dir manifests/crds``):

* ``valid/*.yaml``: realistic objects (several documents per file allowed); both accept every one,
  including its ``status`` (written through the status subresource where the kind has one).
* ``invalid/*.yaml``: one object per file whose first line is ``# expect: PATH, PATH, ...`` (``<nil>``
  for a cause without a field); both reject it with exactly those field paths (the server with
  ``fieldValidation=Strict``).
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from koordinator.apis import schemas
from koordinator.apis.crdschema import check_crd_schema
from tests.apiserver_process import ApiServerProcess

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "data" / "crd-objects"
VALID = sorted((CORPUS / "valid").glob("*.yaml"))
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))
EXPECT = re.compile(r"^#\s*expect:\s*(.*)$", re.M)

# Every kind the brief names, so a schema that goes missing fails here rather than silently.
KINDS = {
    ("slo.koordinator.sh", "v1alpha1", "NodeSLO"), ("slo.koordinator.sh", "v1alpha1", "NodeMetric"),
    ("scheduling.koordinator.sh", "v1alpha1", "Reservation"), ("scheduling.koordinator.sh", "v1alpha1", "Device"),
    ("scheduling.koordinator.sh", "v1alpha1", "PodMigrationJob"),
    ("scheduling.koordinator.sh", "v1alpha1", "ClusterNetworkTopology"),
    ("scheduling.koordinator.sh", "v1alpha1", "ScheduleExplanation"),
    ("config.koordinator.sh", "v1alpha1", "ClusterColocationProfile"),
    ("quota.koordinator.sh", "v1alpha1", "ElasticQuotaProfile"),
    ("scheduling.sigs.k8s.io", "v1alpha1", "ElasticQuota"), ("scheduling.sigs.k8s.io", "v1alpha1", "PodGroup"),
    ("topology.node.k8s.io", "v1alpha1", "NodeResourceTopology"),
    ("topology.node.k8s.io", "v1alpha2", "NodeResourceTopology"),
    ("analysis.koordinator.sh", "v1alpha1", "Recommendation"),
}


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _expected(path: Path) -> set[str]:
    m = EXPECT.search(path.read_text())
    assert m, f"{path.name}: first line must be '# expect: PATH, PATH, ...'"
    # "<nil>" is how Kubernetes prints a cause without a field (e.g. the anyOf summary of a quantity).
    return {"" if p.strip() == "<nil>" else p.strip() for p in m.group(1).split(",") if p.strip()}


# -- the schemas themselves ------------------------------------------------------------------


@pytest.mark.parametrize("schema", schemas.crd_schemas(), ids=lambda s: s.source)
def test_schema_is_accepted_by_the_api_servers_crd_check(schema):
    assert check_crd_schema(schema.schema, "spec.versions[0].schema.openAPIV3Schema") == []
    assert "$ref" not in json.dumps(schema.schema)


def test_every_kind_has_a_schema():
    assert {(s.group, s.version, s.kind) for s in schemas.crd_schemas()} == KINDS


def test_crd_settings_follow_the_reference():
    crds = schemas.crd_manifests()
    summary = {}
    for crd in crds.values():
        spec = crd["spec"]
        summary[spec["names"]["kind"]] = (
            spec["scope"], tuple(spec["names"].get("shortNames", ())),
            tuple((v["name"], v["served"], v["storage"], "status" in v.get("subresources", {}))
                  for v in spec["versions"]))
    assert summary == {
        "NodeSLO": ("Cluster", (), (("v1alpha1", True, True, True),)),
        "NodeMetric": ("Cluster", (), (("v1alpha1", True, True, True),)),
        "Reservation": ("Cluster", (), (("v1alpha1", True, True, True),)),
        "Device": ("Cluster", (), (("v1alpha1", True, True, False),)),
        "PodMigrationJob": ("Cluster", ("pmj",), (("v1alpha1", True, True, True),)),
        "ClusterNetworkTopology": ("Cluster", (), (("v1alpha1", True, True, True),)),
        "ScheduleExplanation": ("Namespaced", ("sched-exp",), (("v1alpha1", True, True, True),)),
        "ClusterColocationProfile": ("Cluster", (), (("v1alpha1", True, True, True),)),
        "ElasticQuotaProfile": ("Namespaced", ("eqp",), (("v1alpha1", True, True, False),)),
        "ElasticQuota": ("Namespaced", (), (("v1alpha1", True, True, False),)),
        "PodGroup": ("Namespaced", (), (("v1alpha1", True, True, False),)),
        "NodeResourceTopology": ("Cluster", ("node-res-topo",),
                                 (("v1alpha1", True, False, False), ("v1alpha2", True, True, False))),
        "Recommendation": ("Namespaced", ("recom",), (("v1alpha1", True, True, True),)),
    }
    columns = {crd["spec"]["names"]["kind"]: [(c["name"], c["jsonPath"]) for c in
                                              crd["spec"]["versions"][0].get("additionalPrinterColumns", [])]
               for crd in crds.values()}
    assert columns["Reservation"] == [("Phase", ".status.phase"), ("Age", ".metadata.creationTimestamp"),
                                      ("Node", ".status.nodeName"), ("TTL", ".spec.ttl"),
                                      ("Expires", ".spec.expires")]
    assert [n for n, _ in columns["PodMigrationJob"]] == ["Phase", "Status", "Age", "Node", "Reservation",
                                                          "PodNamespace", "Pod", "NewPod", "TTL"]
    assert [n for n, _ in columns["Recommendation"]] == ["Age", "Type", "Kind", "Name", "LastUpdateTime"]


def test_generated_manifests_are_up_to_date(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "scripts" / "gen_crds.py")
    gen_crds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_crds)
    assert gen_crds.main(["--check"]) == 0, capsys.readouterr().err


def test_schema_defaults_are_applied():
    reservation = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
                   "metadata": {"name": "r"}, "spec": {"template": {}, "owners": [{"object": {"name": "p"}}],
                                                        "preAllocationPolicy": {}}}
    doc, errors = schemas.validate(schemas.object_schema("scheduling.koordinator.sh/v1alpha1", "Reservation").schema,
                                   reservation)
    assert errors == []
    assert doc["spec"]["ttl"] == "24h" and doc["spec"]["allocateOnce"] is True
    assert doc["spec"]["preAllocationPolicy"] == {"mode": "Default", "enableMultiple": False}


# -- the corpus, offline ---------------------------------------------------------------------


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_objects_pass_validate_object(path):
    for doc in _docs(path):
        assert [str(e) for e in schemas.validate_object(doc)] == [], f"{doc['kind']}/{doc['metadata']['name']}"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_objects_fail_validate_object_at_the_expected_paths(path):
    (doc,) = _docs(path)
    errors = schemas.validate_object(doc)
    assert {e.path for e in errors} == _expected(path), [str(e) for e in errors]


# -- the corpus, against the API server ------------------------------------------------------


@pytest.fixture(scope="module")
def crd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    server = ApiServerProcess(tmp_path_factory.mktemp("crd-server"))
    server.start("--crd-dir", str(ROOT / "manifests" / "crds"))
    try:
        yield server
    finally:
        server.stop()


def _resource_path(server: ApiServerProcess, obj: dict[str, Any]) -> str:
    """The collection URL of ``obj``, from the server's discovery (creating its namespace if needed)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    _, body, _ = server.request("GET", f"/apis/{api_version}", expect=200)
    (res,) = [r for r in body["resources"] if r["kind"] == kind and "/" not in r["name"]]
    if not res["namespaced"]:
        return f"/apis/{api_version}/{res['name']}"
    ns = obj["metadata"].get("namespace", "default")
    server.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    return f"/apis/{api_version}/namespaces/{ns}/{res['name']}"


def _has_status_subresource(server: ApiServerProcess, obj: dict[str, Any]) -> bool:
    _, body, _ = server.request("GET", f"/apis/{obj['apiVersion']}", expect=200)
    return any(r["kind"] == obj["kind"] and r["name"].endswith("/status") for r in body["resources"])


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_objects_are_accepted_by_the_api_server(crd_server, path):
    for doc in _docs(path):
        base = _resource_path(crd_server, doc)
        name = doc["metadata"]["name"]
        crd_server.request("DELETE", f"{base}/{name}")
        status, body, _ = crd_server.request("POST", f"{base}?fieldValidation=Strict", doc)
        assert status == 201, body
        if "status" in doc and _has_status_subresource(crd_server, doc):
            update = copy.deepcopy(body)
            update["status"] = doc["status"]
            status, body, _ = crd_server.request("PUT", f"{base}/{name}/status?fieldValidation=Strict", update)
            assert status == 200, body
        # What the server stored is what the schema module makes of the object (defaults included).
        stored, _ = schemas.validate(schemas.object_schema(doc["apiVersion"], doc["kind"]).schema, doc)
        for key in ("spec", "status"):
            if key in stored:
                assert body.get(key) == stored[key], key


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_objects_are_rejected_by_the_api_server_at_the_expected_paths(crd_server, path):
    (doc,) = _docs(path)
    base = _resource_path(crd_server, doc)
    status, body, _ = crd_server.request("POST", f"{base}?dryRun=All&fieldValidation=Strict", doc)
    assert status == 422, body
    assert {c["field"] for c in body["details"]["causes"]} == _expected(path), body["message"]


def test_unknown_fields_are_refused_by_both(crd_server):
    # Old field names (NodeSLO's resourceQoSStrategy before the rename) must not be silently pruned.
    doc = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "old-names"},
           "spec": {"resourceQoSStrategy": {"be": {}}, "resourceUsedThresholdWithBE": {"enable": True}}}
    assert [str(e) for e in schemas.validate_object(doc)] == [
        "spec.resourceQoSStrategy: unknown field, did you mean 'resourceQOSStrategy'?"]
    status, body, _ = crd_server.request("POST", "/apis/slo.koordinator.sh/v1alpha1/nodeslos?dryRun=All"
                                                 "&fieldValidation=Strict", doc)
    assert status == 400 and 'unknown field "spec.resourceQoSStrategy"' in body["message"], body


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_reports_the_same_paths(crd_server):
    path = CORPUS / "invalid" / "nodeslo-percent-out-of-range.yaml"
    proc = crd_server.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert proc.returncode != 0
    assert set(re.findall(r"^\* ([\w.\[\]/-]+):", proc.stderr, re.M)) == _expected(path)
