"""CustomResourceDefinitions: registration, schema validation, pruning, defaulting, printer columns, subresources."""

import json
import textwrap

CRD = textwrap.dedent("""
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: widgets.example.koordinator.sh
    spec:
      group: example.koordinator.sh
      scope: Namespaced
      names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
      versions:
      - name: v1alpha1
        served: true
        storage: true
        subresources:
          status: {}
          scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
        additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
        - {name: Phase, type: string, jsonPath: .status.phase}
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                required: [size]
                properties:
                  size: {type: integer, minimum: 1, maximum: 10}
                  replicas: {type: integer, default: 1}
                  mode: {type: string, enum: [fast, slow], default: fast}
                  expires: {type: string, format: date-time}
                  extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              status:
                type: object
                properties:
                  phase: {type: string}
                  replicas: {type: integer}
""")


def widget(name, ns, **spec):
    return {"apiVersion": "example.koordinator.sh/v1alpha1", "kind": "Widget",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def install(apiserver):
    apiserver.kubectl("apply", "-f", "-", input=CRD)


def test_crd_is_established_and_discoverable(apiserver):
    install(apiserver)
    crd = json.loads(apiserver.kubectl("get", "crd", "widgets.example.koordinator.sh", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
    _, doc, _ = apiserver.request("GET", "/apis/example.koordinator.sh/v1alpha1", expect=200)
    assert {r["name"] for r in doc["resources"]} == {"widgets", "widgets/status", "widgets/scale"}
    assert "widgets" in apiserver.kubectl("api-resources", "--api-group=example.koordinator.sh").stdout


def test_defaults_and_pruning(apiserver, namespace):
    install(apiserver)
    body = widget("w1", namespace, size=3, bogus="x", extra={"anything": {"goes": 1}})
    path = f"/apis/example.koordinator.sh/v1alpha1/namespaces/{namespace}/widgets"
    _, made, headers = apiserver.request("POST", path, body, expect=201)
    assert made["spec"] == {"size": 3, "replicas": 1, "mode": "fast", "extra": {"anything": {"goes": 1}}}
    assert 'unknown field \\"spec.bogus\\"' in headers["warning"] or 'unknown field "spec.bogus"' in headers["warning"]
    status, err, _ = apiserver.request("POST", path + "?fieldValidation=Strict", widget("w2", namespace, size=3,
                                                                                        bogus="x"))
    assert status == 400 and 'strict decoding error: unknown field "spec.bogus"' in err["message"]
    _, made, headers = apiserver.request("POST", path + "?fieldValidation=Ignore",
                                         widget("w3", namespace, size=3, bogus="x"), expect=201)
    assert "warning" not in headers and "bogus" not in made["spec"]


def test_schema_violations_are_422_with_causes(apiserver, namespace):
    install(apiserver)
    path = f"/apis/example.koordinator.sh/v1alpha1/namespaces/{namespace}/widgets"
    status, err, _ = apiserver.request("POST", path, widget("bad", namespace, size="big", mode="medium",
                                                            expires="YYYY-MM-DDTHH:MM:SSZ"))
    assert status == 422 and err["reason"] == "Invalid"
    fields = {c["field"]: c for c in err["details"]["causes"]}
    assert set(fields) == {"spec.size", "spec.mode", "spec.expires"}
    assert fields["spec.mode"]["reason"] == "FieldValueNotSupported"
    assert 'spec.expires in body must be of type date-time: "YYYY-MM-DDTHH:MM:SSZ"' in fields["spec.expires"]["message"]
    assert err["message"].startswith('Widget.example.koordinator.sh "bad" is invalid: [')
    status, err, _ = apiserver.request("POST", path, widget("missing", namespace))
    assert status == 422 and err["details"]["causes"][0] == {
        "reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"}
    status, err, _ = apiserver.request("POST", path, widget("big", namespace, size=11))
    assert status == 422 and "should be less than or equal to 10" in err["message"]
    # Nothing was stored by the failed attempts.
    _, listed, _ = apiserver.request("GET", path)
    assert [i["metadata"]["name"] for i in listed["items"] if i["metadata"]["name"] in ("bad", "missing", "big")] == []


def test_kubectl_strict_validation_names_unknown_fields(apiserver, namespace):
    install(apiserver)
    doc = json.dumps(widget("strict", namespace, size=2, colour="red"))
    proc = apiserver.kubectl("apply", "-f", "-", input=doc, check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.colour"' in proc.stderr
    proc = apiserver.kubectl("apply", "-f", "-", input=json.dumps(widget("strict", namespace, size=20)), check=False)
    assert proc.returncode != 0 and "spec.size" in proc.stderr


def test_printer_columns_status_and_scale(apiserver, namespace):
    install(apiserver)
    path = f"/apis/example.koordinator.sh/v1alpha1/namespaces/{namespace}/widgets"
    body = widget("cols", namespace, size=4)
    body["status"] = {"phase": "Ignored"}
    _, made, _ = apiserver.request("POST", path, body, expect=201)
    assert "status" not in made  # status is the status subresource's
    merge = {"Content-Type": "application/merge-patch+json"}
    _, st, _ = apiserver.request("PATCH", f"{path}/cols/status", {"status": {"phase": "Ready", "replicas": 1}},
                                 headers=merge, expect=200)
    assert st["status"]["phase"] == "Ready" and st["metadata"]["generation"] == 1
    out = apiserver.kubectl("get", "widgets", "-n", namespace).stdout.splitlines()
    # Like the real server: Name plus the declared columns (an Age column must be declared too).
    assert out[0].split() == ["NAME", "SIZE", "PHASE"]
    assert out[1].split()[:3] == ["cols", "4", "Ready"]
    apiserver.kubectl("scale", "widget", "cols", "-n", namespace, "--replicas=3")
    _, scaled, _ = apiserver.request("GET", f"{path}/cols", expect=200)
    assert scaled["spec"]["replicas"] == 3 and scaled["metadata"]["generation"] == 2


def test_strategic_merge_patch_is_refused_for_custom_resources(apiserver, namespace):
    install(apiserver)
    path = f"/apis/example.koordinator.sh/v1alpha1/namespaces/{namespace}/widgets"
    apiserver.request("POST", path, widget("smp", namespace, size=1), expect=201)
    status, _, _ = apiserver.request("PATCH", f"{path}/smp", {"spec": {"size": 2}},
                                     headers={"Content-Type": "application/strategic-merge-patch+json"})
    assert status == 415


def test_invalid_crd_is_rejected(apiserver):
    bad = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "scope": "Everywhere", "names": {"plural": "stuff", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": False,
                                  "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    status, err, _ = apiserver.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad)
    assert status == 422
    fields = {c["field"] for c in err["details"]["causes"]}
    assert {"spec.scope", "metadata.name", "spec.versions"} <= fields


def test_deleting_crd_deletes_objects(apiserver, namespace):
    crd = CRD.replace("widgets", "gadgets").replace("widget", "gadget").replace("Widget", "Gadget").replace(
        "shortNames: [wd]", "shortNames: [gd]")
    apiserver.kubectl("apply", "-f", "-", input=crd)
    path = f"/apis/example.koordinator.sh/v1alpha1/namespaces/{namespace}/gadgets"
    apiserver.request("POST", path, {**widget("g", namespace, size=1), "kind": "Gadget"}, expect=201)
    apiserver.kubectl("delete", "crd", "gadgets.example.koordinator.sh")
    status, _, _ = apiserver.request("GET", path)
    assert status == 404


def test_crd_dir_preload(fresh_apiserver, tmp_path):
    crd_dir = tmp_path / "crds"
    crd_dir.mkdir()
    (crd_dir / "widgets.yaml").write_text(CRD)
    fresh_apiserver.start("--crd-dir", str(crd_dir))
    _, doc, _ = fresh_apiserver.request("GET", "/apis/example.koordinator.sh/v1alpha1", expect=200)
    assert doc["resources"][0]["name"] == "widgets"
