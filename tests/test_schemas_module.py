"""koordinator.apis.schemas: loading, $ref resolution, validation messages, formats, generation."""

from __future__ import annotations

import pytest

from koordinator.apis import schemas
from koordinator.apis.schemas import FieldError, SchemaNotFound

CONFIG = {
    "type": "object",
    "properties": {
        "enable": {"type": "boolean", "default": False},
        "cpuReclaimThresholdPercent": {"type": "integer", "minimum": 0, "maximum": 100},
        "cpuEvictTimeWindowSeconds": {"type": "integer"},
        "budget": {"$ref": "common.yaml#/QuantityValue"},
        "period": {"$ref": "common.yaml#/GoDuration", "default": "1m"},
        "requests": {"type": "object", "additionalProperties": {"$ref": "common.yaml#/QuantityValue"}},
        "nodeStrategies": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "window": {"$ref": "common.yaml#/GoDuration"}}}},
    },
}


def check(doc):
    return schemas.validate(schemas._resolve(CONFIG, "test"), doc)


def test_refs_are_resolved_and_siblings_override():
    resolved = schemas._resolve(CONFIG, "test")
    assert resolved["properties"]["period"] == {"description": "A Go duration such as 30s, 10m or 1h30m.",
                                                "type": "string", "format": "duration", "default": "1m"}
    assert "$ref" not in repr(resolved)


def test_defaults_are_applied_and_valid_documents_pass():
    doc, errors = check({"cpuReclaimThresholdPercent": 60, "budget": "1.5Gi", "requests": {"cpu": 2}})
    assert errors == []
    assert doc["enable"] is False and doc["period"] == "1m"


def test_errors_name_the_path_and_value():
    _, errors = check({"cpuReclaimThresholdPercent": 120, "budget": "lots", "period": "ten minutes",
                       "requests": {"cpu": "two", "memory": "1Gi"}, "nodeStrategies": [{"window": "5x"}]})
    got = {e.path: e.message for e in errors}
    assert got["cpuReclaimThresholdPercent"].startswith("Invalid value: 120:")
    assert "less than or equal to 100" in got["cpuReclaimThresholdPercent"]
    assert got["budget"] == 'Invalid value: "lots": is not a valid quantity'
    assert got["requests.cpu"] == 'Invalid value: "two": is not a valid quantity'
    assert got["period"].startswith('Invalid value: "ten minutes": is not a valid duration')
    assert got["nodeStrategies[0].window"].startswith('Invalid value: "5x": is not a valid duration')
    assert "requests.memory" not in got
    assert str(FieldError("budget", "x")) == "budget: x"


def test_unknown_fields_suggest_the_real_one():
    _, errors = check({"CPUEvictTimeWindowSeconds": 10, "cpuReclaimThresholdPrecent": 5, "zzz": 1,
                       "nodeStrategies": [{"nmae": "a"}]})
    got = {e.path: e.message for e in errors}
    assert got["CPUEvictTimeWindowSeconds"] == "unknown field, did you mean 'cpuEvictTimeWindowSeconds'?"
    assert got["cpuReclaimThresholdPrecent"] == "unknown field, did you mean 'cpuReclaimThresholdPercent'?"
    assert got["zzz"] == "unknown field"
    assert got["nodeStrategies[0].nmae"] == "unknown field, did you mean 'name'?"


def test_wrong_types_are_reported_not_raised():
    _, errors = check({"enable": "yes", "nodeStrategies": {"a": 1}})
    paths = {e.path for e in errors}
    assert {"enable", "nodeStrategies"} <= paths


def test_missing_and_cyclic_refs_are_clear_errors(monkeypatch):
    with pytest.raises(SchemaNotFound, match="nope.yaml"):
        schemas._resolve({"$ref": "nope.yaml#/X"}, "test")
    with pytest.raises(SchemaNotFound, match="'Missing' not found"):
        schemas._resolve({"$ref": "common.yaml#/Missing"}, "test")
    cyclic = {"A": {"$ref": "cyc.yaml#/B"}, "B": {"$ref": "cyc.yaml#/A"}}
    monkeypatch.setattr(schemas, "_read", lambda rel: cyclic)
    with pytest.raises(SchemaNotFound, match="cycle"):
        schemas._resolve({"$ref": "cyc.yaml#/A"}, "cyc.yaml")


def test_unknown_kinds_and_documents_list_what_exists():
    with pytest.raises(SchemaNotFound, match="known kinds: .*ElasticQuota"):
        schemas.object_schema("quota.koordinator.sh/v1alpha1", "ElasticQuota")
    with pytest.raises(SchemaNotFound, match="no schema for config document 'no-such-config'"):
        schemas.config_schema("no-such-config")


def test_validate_object_checks_shape_first():
    assert schemas.validate_object([]) == [FieldError("", "must be an object, got array")]
    assert schemas.validate_object({"kind": "ElasticQuota"}) == [FieldError("apiVersion", "Required value")]


def test_crd_quantities_read_as_quantities():
    errors = schemas.validate_object({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                                      "metadata": {"name": "q"}, "spec": {"min": {"cpu": "abc"}, "mx": {}}})
    assert [str(e) for e in errors] == ['spec.min.cpu: Invalid value: "abc": is not a valid quantity',
                                        "spec.mx: unknown field, did you mean 'max'?"]


def test_version_order_prefers_ga_then_beta_then_alpha():
    ordered = sorted(["v1alpha1", "v1beta1", "v1", "v2alpha1", "v1beta2"], key=schemas.version_order)
    assert ordered == ["v1alpha1", "v2alpha1", "v1beta1", "v1beta2", "v1"]


def test_generated_crd_shape():
    crds = schemas.crd_manifests()
    eq = crds["scheduling.sigs.k8s.io_elasticquotas.yaml"]
    assert eq["metadata"]["name"] == "elasticquotas.scheduling.sigs.k8s.io"
    assert eq["spec"]["names"]["listKind"] == "ElasticQuotaList"
    version = eq["spec"]["versions"][0]
    assert version["served"] is True and version["storage"] is True
    schema = version["schema"]["openAPIV3Schema"]
    assert "x-koordinator-crd" not in schema and "$ref" not in repr(schema)
