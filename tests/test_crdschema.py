"""Structural schema processing of custom objects: pruning, defaulting, validation, CRD schema checks.

Expected messages are kube-apiserver's (kube-openapi's validators as wrapped by
apiextensions-apiserver, apimachinery's field.Error rendering).
"""

import copy
import time

import pytest

from koordinator.apis.crdschema import StructuralSchema, _go_float, _go_json, check_crd_schema

SCHEMA_PATH = "spec.versions[0].schema.openAPIV3Schema"

PERCENT = {"type": "integer", "minimum": 0, "maximum": 100}

RESERVATION = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["template", "owners"],
            "properties": {
                "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "owners": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "object": {"type": "object", "properties": {
                                "name": {"type": "string"}, "namespace": {"type": "string"}}},
                            "labelSelector": {"type": "object", "properties": {
                                "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                        },
                    },
                },
                "ttl": {"type": "string"},
                "expires": {"type": "string", "format": "date-time"},
                "allocateOnce": {"type": "boolean", "default": True},
                "allocatePolicy": {"type": "string", "enum": ["Aligned", "Restricted"]},
                "unschedulable": {"type": "boolean"},
                "taints": {"type": "array", "items": {"type": "object", "required": ["key", "effect"], "properties": {
                    "key": {"type": "string"}, "value": {"type": "string"},
                    "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}}}},
            },
        },
        "status": {"type": "object", "properties": {
            "phase": {"type": "string"},
            "nodeName": {"type": "string"},
            "allocatable": {"type": "object", "additionalProperties": {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",  # noqa: E501
            }},
        }},
    },
}

NODESLO = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {
            "resourceUsedThresholdWithBE": {"type": "object", "properties": {
                "enable": {"type": "boolean", "default": False},
                "cpuSuppressThresholdPercent": PERCENT,
                "cpuSuppressPolicy": {"type": "string", "enum": ["cpuset", "cfsQuota"], "default": "cpuset"},
                "memoryEvictThresholdPercent": PERCENT,
                "cpuEvictTimeWindowSeconds": {"type": "integer", "minimum": 1},
            }},
            "resourceQOSStrategy": {"type": "object", "properties": {
                "beClass": {"type": "object", "properties": {
                    "cpuQOS": {"type": "object", "properties": {
                        "enable": {"type": "boolean"}, "groupIdentity": {"type": "integer"}}},
                    "memoryQOS": {"type": "object", "properties": {
                        "enable": {"type": "boolean"}, "wmarkRatio": PERCENT,
                        "wmarkMinAdj": {"type": "integer", "minimum": -25, "maximum": 50}}},
                }},
            }},
            "extensions": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "hostApplications": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"},
                "qos": {"type": "string", "default": "LS"},
                "cgroupPath": {"type": "object", "properties": {
                    "base": {"type": "string", "default": "CgroupRoot"}, "relativePath": {"type": "string"}}},
            }}},
        }},
    },
}


def reservation(**spec):
    body = {"template": {"spec": {"containers": []}}, "owners": [{"object": {"name": "pod-a"}}]}
    body.update(spec)
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
            "metadata": {"name": "r1"}, "spec": body}


def nodeslo(**spec):
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "node-1"},
            "spec": spec}


def process_spec(spec_schema, spec, **schema_extra):
    schema = {"type": "object", "properties": {"spec": spec_schema}, **schema_extra}
    return StructuralSchema(schema).process({"apiVersion": "x.koordinator.sh/v1", "kind": "X",
                                             "metadata": {"name": "x"}, "spec": spec})


def only_cause(result):
    assert len(result.causes) == 1, result.causes
    return result.causes[0]


# --------------------------------------------------------------------------------------------- pruning


def test_valid_reservation_passes_and_is_defaulted():
    result = StructuralSchema(RESERVATION).process(reservation(ttl="1h", expires="2030-01-02T03:04:05Z"))
    assert result.causes == [] and result.unknown_fields == []
    assert result.obj["spec"]["allocateOnce"] is True
    assert result.obj["spec"]["ttl"] == "1h"


def test_unknown_fields_are_pruned_and_reported_in_document_order():
    obj = reservation(foo=1, owners=[{"object": {"name": "a", "uid": "x"}, "extra": {"deep": 1}}])
    obj["spec"]["bar"] = {"nested": True}
    obj["other"] = "top"
    result = StructuralSchema(RESERVATION).process(obj)
    # "owners" comes before "foo" in the spec (reservation() sets it first)
    assert result.unknown_fields == ["spec.owners[0].object.uid", "spec.owners[0].extra", "spec.foo", "spec.bar",
                                     "other"]
    assert "foo" not in result.obj["spec"] and "bar" not in result.obj["spec"] and "other" not in result.obj
    assert result.obj["spec"]["owners"] == [{"object": {"name": "a"}}]
    assert result.causes == []


def test_root_type_meta_and_metadata_are_never_pruned():
    obj = reservation()
    obj["metadata"] = {"name": "r1", "labels": {"a": "b"}, "annotations": {"x": "y"}, "resourceVersion": "5"}
    result = StructuralSchema({"type": "object", "properties": {"spec": {"type": "object",
                                                                         "x-kubernetes-preserve-unknown-fields": True}}}
                              ).process(obj)
    assert result.unknown_fields == []
    assert result.obj["apiVersion"] == obj["apiVersion"] and result.obj["kind"] == "Reservation"
    assert result.obj["metadata"] == obj["metadata"]


def test_preserve_unknown_fields_keeps_unknown_but_prunes_specified_subtrees():
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
        "known": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    result = process_spec(schema, {"anything": {"goes": [1, {"x": 2}]}, "known": {"a": "x", "b": "pruned"}})
    assert result.obj["spec"] == {"anything": {"goes": [1, {"x": 2}]}, "known": {"a": "x"}}
    # preservation is not inherited by nested properties that are specified
    assert result.unknown_fields == ["spec.known.b"]


def test_preserve_unknown_fields_on_arrays_applies_to_their_items():
    schema = {"type": "object", "properties": {"ext": {
        "type": "array", "x-kubernetes-preserve-unknown-fields": True,
        "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}}
    result = process_spec(schema, {"ext": [{"n": 1, "other": {"k": 1}}]})
    assert result.obj["spec"]["ext"] == [{"n": 1, "other": {"k": 1}}] and result.unknown_fields == []


def test_additional_properties_keep_every_key_and_apply_the_value_schema():
    schema = {"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {
        "type": "object", "properties": {"v": {"type": "string"}}}}}}
    result = process_spec(schema, {"labels": {"a": {"v": "1", "junk": 1}, "b.c/d": {"v": "2"}}})
    assert result.obj["spec"]["labels"] == {"a": {"v": "1"}, "b.c/d": {"v": "2"}}
    assert result.unknown_fields == ["spec.labels.a.junk"]


def test_map_of_strings_validates_values():
    result = StructuralSchema(RESERVATION).process(reservation(owners=[{"labelSelector": {"matchLabels": {
        "app": "web", "tier": 3}}}]))
    cause = only_cause(result)
    assert cause == {"reason": "FieldValueTypeInvalid", "field": "spec.owners[0].labelSelector.matchLabels.tier",
                     "message": 'Invalid value: "integer": spec.owners[0].labelSelector.matchLabels.tier in body '
                                'must be of type string: "integer"'}


def test_embedded_resource_keeps_type_meta_and_object_meta_only():
    schema = {"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "properties": {"spec": {"type": "object", "properties": {"nodeName": {"type": "string"}}}}}}}
    template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}, "bogus": 1},
                "spec": {"nodeName": "n1", "x": 1}, "extra": True}
    result = process_spec(schema, {"template": template})
    assert result.obj["spec"]["template"] == {"apiVersion": "v1", "kind": "Pod",
                                              "metadata": {"name": "p", "labels": {"a": "b"}},
                                              "spec": {"nodeName": "n1"}}
    assert result.unknown_fields == ["spec.template.metadata.bogus", "spec.template.spec.x", "spec.template.extra"]
    assert result.causes == []


def test_embedded_resource_requires_api_version_and_kind():
    schema = {"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True, "x-kubernetes-preserve-unknown-fields": True}}}
    result = process_spec(schema, {"template": {"apiVersion": "a/b/c"}})
    assert result.causes == [
        {"reason": "FieldValueRequired", "field": "spec.template.kind", "message": "Required value: must not be empty"},
        {"reason": "FieldValueInvalid", "field": "spec.template.apiVersion",
         "message": 'Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c'},
    ]


def test_int_or_string_accepts_both_and_rejects_the_rest():
    schema = StructuralSchema(RESERVATION)
    obj = reservation()
    obj["status"] = {"allocatable": {"cpu": 4, "memory": "8Gi"}}
    result = schema.process(obj)
    assert result.causes == [] and result.obj["status"]["allocatable"] == {"cpu": 4, "memory": "8Gi"}
    obj["status"] = {"allocatable": {"cpu": True}}
    result = schema.process(obj)
    assert result.causes[0] == {
        "reason": "FieldValueTypeInvalid", "field": "status.allocatable.cpu",
        "message": 'Invalid value: "boolean": status.allocatable.cpu in body must be of type integer,string: '
                   '"boolean"'}
    assert result.causes[1]["message"] == ('Invalid value: "": "status.allocatable.cpu" must validate at least one '
                                           'schema (anyOf)')
    assert result.causes[1]["field"] == ""


def test_values_of_the_wrong_shape_are_pruned_by_structure():
    # pruning follows the value's shape: an object given where an array is expected loses its keys
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}}
    result = process_spec(schema, {"xs": {"a": 1}})
    assert result.unknown_fields == ["spec.xs.a"]
    assert only_cause(result)["message"] == 'Invalid value: "object": spec.xs in body must be of type array: "object"'


def test_input_object_is_not_mutated():
    obj = reservation(foo=1, owners=[{"object": {"name": "a", "bad": 1}}])
    obj["status"] = {"phase": "Pending", "junk": [1]}
    before = copy.deepcopy(obj)
    result = StructuralSchema(RESERVATION).process(obj)
    assert obj == before
    assert result.obj is not obj and result.obj["spec"] is not obj["spec"]
    assert result.obj["metadata"] is not obj["metadata"]
    result.obj["spec"]["template"]["spec"]["containers"].append("x")
    assert obj["spec"]["template"]["spec"]["containers"] == []


# --------------------------------------------------------------------------------------------- defaulting


def test_nested_defaults_apply_inside_defaults_and_only_to_absent_fields():
    schema = {"type": "object", "properties": {"policy": {
        "type": "object", "default": {},
        "properties": {"mode": {"type": "string", "default": "fast"},
                       "limits": {"type": "object", "default": {"cpu": 1},
                                  "properties": {"cpu": {"type": "integer"}, "mem": {"type": "integer", "default": 2}}}}}}}
    assert process_spec(schema, {}).obj["spec"] == {"policy": {"mode": "fast", "limits": {"cpu": 1, "mem": 2}}}
    result = process_spec(schema, {"policy": {"mode": "slow"}})
    assert result.obj["spec"] == {"policy": {"mode": "slow", "limits": {"cpu": 1, "mem": 2}}}


def test_nodeslo_defaults_in_objects_and_array_items():
    result = StructuralSchema(NODESLO).process(nodeslo(
        resourceUsedThresholdWithBE={"cpuSuppressThresholdPercent": 65},
        hostApplications=[{"name": "nginx", "cgroupPath": {"relativePath": "nginx/"}}, {"name": "x", "qos": "BE"}]))
    assert result.causes == []
    spec = result.obj["spec"]
    assert spec["resourceUsedThresholdWithBE"] == {"cpuSuppressThresholdPercent": 65, "enable": False,
                                                   "cpuSuppressPolicy": "cpuset"}
    assert spec["hostApplications"] == [
        {"name": "nginx", "cgroupPath": {"relativePath": "nginx/", "base": "CgroupRoot"}, "qos": "LS"},
        {"name": "x", "qos": "BE"}]


def test_defaults_in_map_values_and_null_items():
    schema = {"type": "object", "properties": {
        "pools": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "weight": {"type": "integer", "default": 1}}}},
        "names": {"type": "array", "items": {"type": "string", "default": "none"}}}}
    result = process_spec(schema, {"pools": {"a": {}, "b": {"weight": 5}}, "names": ["x", None]})
    assert result.obj["spec"] == {"pools": {"a": {"weight": 1}, "b": {"weight": 5}}, "names": ["x", "none"]}
    assert result.causes == []


def test_defaults_are_not_shared_between_objects_nor_reported_as_unknown():
    schema = StructuralSchema({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "default": ["a"]}}}}})
    first = schema.process({"spec": {}})
    first.obj["spec"]["tags"].append("mutated")
    assert schema.process({"spec": {}}).obj["spec"]["tags"] == ["a"]
    assert first.unknown_fields == []


def test_null_handling_nullable_defaulted_and_pruned():
    schema = {"type": "object", "properties": {
        "nullable": {"type": "string", "nullable": True},
        "defaulted": {"type": "string", "default": "d"},
        "plain": {"type": "string"},
        "listed": {"type": "array", "items": {"type": "string"}}}}
    result = process_spec(schema, {"nullable": None, "defaulted": None, "plain": None, "listed": ["a", None]})
    assert result.obj["spec"] == {"nullable": None, "defaulted": "d", "listed": ["a", None]}
    assert result.unknown_fields == []  # a pruned null is not an unknown field
    assert only_cause(result) == {"reason": "FieldValueTypeInvalid", "field": "spec.listed[1]",
                                  "message": 'Invalid value: "null": spec.listed[1] in body must be of type string: '
                                             '"null"'}


def test_required_is_checked_after_defaulting():
    schema = {"type": "object", "required": ["mode"], "properties": {"mode": {"type": "string", "default": "x"}}}
    assert process_spec(schema, {}).causes == []
    assert process_spec(schema, {"mode": None}).obj["spec"] == {"mode": "x"}


# --------------------------------------------------------------------------------------------- validation


def test_type_errors_name_the_json_type_given():
    schema = {"type": "object", "properties": {
        "replicas": {"type": "integer"}, "flag": {"type": "boolean"}, "obj": {"type": "object"},
        "list": {"type": "array", "items": {"type": "string"}}, "ratio": {"type": "number"}}}
    result = process_spec(schema, {"replicas": "string", "flag": 1.5, "obj": [], "list": "x", "ratio": 3})
    assert [(c["field"], c["reason"], c["message"]) for c in result.causes] == [
        ("spec.replicas", "FieldValueTypeInvalid",
         'Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
        ("spec.flag", "FieldValueTypeInvalid", 'Invalid value: "number": spec.flag in body must be of type boolean: '
                                               '"number"'),
        ("spec.obj", "FieldValueTypeInvalid", 'Invalid value: "array": spec.obj in body must be of type object: '
                                              '"array"'),
        ("spec.list", "FieldValueTypeInvalid", 'Invalid value: "string": spec.list in body must be of type array: '
                                               '"string"'),
    ]


def test_integral_floats_are_integers_and_are_stored_as_such():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "f": {"type": "number"}}}
    result = process_spec(schema, {"n": 2.0, "f": 2.5})
    assert result.causes == [] and result.obj["spec"] == {"n": 2, "f": 2.5}
    assert type(result.obj["spec"]["n"]) is int
    assert only_cause(process_spec(schema, {"n": 2.5}))["message"] == (
        'Invalid value: "number": spec.n in body must be of type integer: "number"')


def test_reservation_expires_must_be_a_date_time():
    result = StructuralSchema(RESERVATION).process(reservation(expires="YYYY-MM-DDTHH:MM:SSZ"))
    assert only_cause(result) == {
        "reason": "FieldValueTypeInvalid", "field": "spec.expires",
        "message": 'Invalid value: "YYYY-MM-DDTHH:MM:SSZ": spec.expires in body must be of type date-time: '
                   '"YYYY-MM-DDTHH:MM:SSZ"'}


@pytest.mark.parametrize("value,ok", [
    ("2024-02-29T10:00:00Z", True), ("2024-01-01T23:59:59.123456+08:00", True), ("2024-01-01t10:00:00z", True),
    ("2023-02-29T10:00:00Z", False), ("2024-01-01T10:00:00", False), ("2024-01-01 10:00:00Z", False),
    ("2024-01-01T24:00:00Z", False), ("2024-13-01T10:00:00Z", False),
])
def test_date_time_format(value, ok):
    result = StructuralSchema(RESERVATION).process(reservation(expires=value))
    assert (result.causes == []) is ok


@pytest.mark.parametrize("fmt,good,bad", [
    ("date", "2024-02-29", "2024-2-29"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
    ("ipv4", "10.0.0.1", "10.0.0.256"),
    ("ipv6", "fe80::1", "10.0.0.1"),
    ("cidr", "10.0.0.0/8", "10.0.0.0"),
    ("byte", "aGVsbG8=", "hello!"),
    ("duration", "1h30m", "soon"),
    ("hostname", "node-1.example.com", "-bad-"),
    ("mac", "01:23:45:67:89:ab", "01:23:45"),
])
def test_string_formats(fmt, good, bad):
    schema = {"type": "object", "properties": {"v": {"type": "string", "format": fmt}}}
    assert process_spec(schema, {"v": good}).causes == []
    assert only_cause(process_spec(schema, {"v": bad}))["message"] == (
        f'Invalid value: "{bad}": spec.v in body must be of type {fmt}: "{bad}"')


def test_unknown_formats_are_not_checked():
    schema = {"type": "object", "properties": {"q": {"type": "string", "format": "int-or-string"},
                                               "n": {"type": "integer", "format": "int32"}}}
    assert process_spec(schema, {"q": "anything", "n": 2 ** 40}).causes == []


def test_required_enum_and_combined_causes():
    result = StructuralSchema(RESERVATION).process(reservation(allocatePolicy="Loose", owners=None))
    assert result.causes == [
        {"reason": "FieldValueNotSupported", "field": "spec.allocatePolicy",
         "message": 'Unsupported value: "Loose": supported values: "Aligned", "Restricted"'},
        {"reason": "FieldValueRequired", "field": "spec.owners", "message": "Required value"},
    ]


def test_enum_of_non_strings_and_null():
    schema = {"type": "object", "properties": {"level": {"type": "integer", "enum": [1, 2]},
                                               "opt": {"type": "string", "nullable": True, "enum": ["a"]}}}
    result = process_spec(schema, {"level": 3, "opt": None})
    assert [c["message"] for c in result.causes] == [
        'Unsupported value: 3: supported values: "1", "2"',
        'Unsupported value: null: supported values: "a"',  # kube-openapi never matches null against an enum
    ]
    assert process_spec(schema, {"level": 2.0}).causes == []


def test_nodeslo_threshold_bounds():
    schema = StructuralSchema(NODESLO)
    result = schema.process(nodeslo(resourceUsedThresholdWithBE={"cpuSuppressThresholdPercent": -1,
                                                                 "memoryEvictThresholdPercent": 101}))
    assert result.causes == [
        {"reason": "FieldValueInvalid", "field": "spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent",
         "message": "Invalid value: -1: spec.resourceUsedThresholdWithBE.cpuSuppressThresholdPercent in body "
                    "should be greater than or equal to 0"},
        {"reason": "FieldValueInvalid", "field": "spec.resourceUsedThresholdWithBE.memoryEvictThresholdPercent",
         "message": "Invalid value: 101: spec.resourceUsedThresholdWithBE.memoryEvictThresholdPercent in body "
                    "should be less than or equal to 100"},
    ]
    ok = schema.process(nodeslo(resourceUsedThresholdWithBE={"cpuSuppressThresholdPercent": 0,
                                                             "memoryEvictThresholdPercent": 100}))
    assert ok.causes == []
    nested = schema.process(nodeslo(resourceQOSStrategy={"beClass": {"memoryQOS": {"wmarkMinAdj": -26}}}))
    assert only_cause(nested)["field"] == "spec.resourceQOSStrategy.beClass.memoryQOS.wmarkMinAdj"
    assert only_cause(nested)["message"].endswith("should be greater than or equal to -25")


def test_exclusive_bounds_multiple_of_and_float_bounds():
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
        "b": {"type": "integer", "maximum": 10, "exclusiveMaximum": True, "multipleOf": 3},
        "c": {"type": "number", "minimum": 0.5},
        "d": {"type": "number", "multipleOf": 0.25}}}
    result = process_spec(schema, {"a": 0, "b": 10, "c": 0.25, "d": 0.3})
    assert [(c["field"], c["message"]) for c in result.causes] == [
        ("spec.a", "Invalid value: 0: spec.a in body should be greater than 0"),
        ("spec.b", "Invalid value: 10: spec.b in body should be a multiple of 3"),
        ("spec.b", "Invalid value: 10: spec.b in body should be less than 10"),
        ("spec.c", "Invalid value: 0.25: spec.c in body should be greater than or equal to 0.5"),
        ("spec.d", "Invalid value: 0.3: spec.d in body should be a multiple of 0.25"),
    ]
    assert process_spec(schema, {"a": 1, "b": 9, "c": 0.5, "d": 0.75}).causes == []


def test_string_length_and_pattern():
    schema = {"type": "object", "properties": {
        "short": {"type": "string", "maxLength": 5},
        "one": {"type": "string", "maxLength": 1},
        "long": {"type": "string", "minLength": 1},
        "name": {"type": "string", "pattern": "^[a-z]+$"}}}
    result = process_spec(schema, {"short": "toolong", "one": "ab", "long": "", "name": "abc1"})
    assert result.causes == [
        {"reason": "FieldValueTooLong", "field": "spec.short", "message": "Too long: may not be more than 5 bytes"},
        {"reason": "FieldValueTooLong", "field": "spec.one", "message": "Too long: may not be more than 1 byte"},
        {"reason": "FieldValueInvalid", "field": "spec.long",
         "message": 'Invalid value: "": spec.long in body should be at least 1 chars long'},
        {"reason": "FieldValueInvalid", "field": "spec.name",
         "message": "Invalid value: \"abc1\": spec.name in body should match '^[a-z]+$'"},
    ]
    # Go's $ is the end of the text: a trailing newline does not match
    assert only_cause(process_spec(schema, {"name": "abc\n"}))["message"] == (
        "Invalid value: \"abc\\n\": spec.name in body should match '^[a-z]+$'")
    # lengths count characters, not bytes
    assert process_spec(schema, {"short": "ééééé"}).causes == []


def test_item_counts_and_unique_items():
    schema = {"type": "object", "properties": {
        "few": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "many": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
        "uniq": {"type": "array", "uniqueItems": True, "items": {"type": "integer"}}}}
    result = process_spec(schema, {"few": [], "many": ["a", "b", "c"], "uniq": [1, 2, 1]})
    assert result.causes == [
        {"reason": "FieldValueInvalid", "field": "spec.few",
         "message": "Invalid value: 0: spec.few in body should have at least 1 items"},
        {"reason": "FieldValueTooMany", "field": "spec.many", "message": "Too many: 3: must have at most 2 items"},
        {"reason": "FieldValueInvalid", "field": "spec.uniq",
         "message": 'Invalid value: "": spec.uniq in body shouldn\'t contain duplicates'},
    ]


def test_property_counts_stop_validation_below():
    schema = {"type": "object", "properties": {
        "sel": {"type": "object", "minProperties": 2, "properties": {"a": {"type": "integer", "minimum": 5}}},
        "map": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}}}
    result = process_spec(schema, {"sel": {"a": 1}, "map": {"x": "1", "y": "2"}})
    assert result.causes == [
        {"reason": "FieldValueInvalid", "field": "spec.sel",
         "message": "Invalid value: 1: spec.sel in body should have at least 2 properties"},
        {"reason": "FieldValueTooMany", "field": "spec.map", "message": "Too many: 2: must have at most 1 item"},
    ]


def test_required_fields_nested_and_in_arrays():
    result = StructuralSchema(RESERVATION).process(reservation(taints=[{"key": "a", "effect": "NoSchedule"},
                                                                       {"value": "v"}]))
    assert result.causes == [
        {"reason": "FieldValueRequired", "field": "spec.taints[1].key", "message": "Required value"},
        {"reason": "FieldValueRequired", "field": "spec.taints[1].effect", "message": "Required value"},
    ]
    obj = reservation()
    del obj["spec"]["template"]
    assert only_cause(StructuralSchema(RESERVATION).process(obj))["field"] == "spec.template"


def test_list_type_set_and_map_duplicates():
    schema = {"type": "object", "properties": {
        "zones": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "protocol"],
                  "items": {"type": "object", "properties": {
                      "name": {"type": "string"}, "protocol": {"type": "string", "default": "TCP"},
                      "port": {"type": "integer"}}}}}}
    result = process_spec(schema, {"zones": ["a", "b", "a", "a", "b"], "ports": [
        {"name": "http", "port": 80}, {"name": "http", "protocol": "TCP", "port": 8080},
        {"name": "http", "protocol": "UDP", "port": 80}]})
    assert result.causes == [
        {"reason": "FieldValueDuplicate", "field": "spec.zones[2]", "message": 'Duplicate value: "a"'},
        {"reason": "FieldValueDuplicate", "field": "spec.zones[4]", "message": 'Duplicate value: "b"'},
        {"reason": "FieldValueDuplicate", "field": "spec.ports[1]",
         "message": 'Duplicate value: {"name":"http","protocol":"TCP"}'},
    ]


def test_list_type_map_missing_key():
    schema = {"type": "object", "properties": {"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}
    result = process_spec(schema, {"ports": [{"name": "a"}, {"port": 1}]})
    assert result.causes == [{"reason": "FieldValueRequired", "field": "spec.ports[1].name",
                              "message": "Required value"}]


def test_logic_junctors():
    schema = {"type": "object",
              "oneOf": [{"required": ["cpu"]}, {"required": ["memory"]}],
              "not": {"required": ["forbidden"]},
              "allOf": [{"properties": {"cpu": {"maximum": 8}}}],
              "properties": {"cpu": {"type": "integer"}, "memory": {"type": "string"},
                             "forbidden": {"type": "string"}}}
    assert process_spec(schema, {"cpu": 4}).causes == []
    result = process_spec(schema, {"cpu": 9, "memory": "1Gi", "forbidden": "x"})
    assert [(c["field"], c["message"]) for c in result.causes] == [
        ("", 'Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives'),
        ("spec.cpu", "Invalid value: 9: spec.cpu in body should be less than or equal to 8"),
        ("", 'Invalid value: "": "spec" must validate all the schemas (allOf). None validated'),
        ("", 'Invalid value: "": "spec" must not validate the schema (not)'),
    ]
    none = process_spec(schema, {})
    assert none.causes[0]["message"] == ('Invalid value: "": "spec" must validate one and only one schema (oneOf). '
                                         'Found none valid')
    assert none.causes[1] == {"reason": "FieldValueRequired", "field": "spec.cpu", "message": "Required value"}


def test_cel_validation_rules_are_ignored():
    schema = {"type": "object", "x-kubernetes-validations": [{"rule": "self.a > 100"}],
              "properties": {"a": {"type": "integer"}}}
    assert process_spec(schema, {"a": 1}).causes == []


def test_root_metadata_only_name_restrictions_apply():
    schema = dict(RESERVATION)
    schema["properties"] = dict(RESERVATION["properties"],
                                metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}})
    obj = reservation()
    obj["metadata"] = {"name": "much-too-long", "labels": {"x": "y"}}
    result = StructuralSchema(schema).process(obj)
    assert result.causes == [{"reason": "FieldValueTooLong", "field": "metadata.name",
                              "message": "Too long: may not be more than 5 bytes"}]
    assert result.obj["metadata"] == obj["metadata"] and result.unknown_fields == []


def test_status_subresource_flag_does_not_change_processing():
    obj = reservation(foo=1)
    obj["status"] = {"phase": "Available", "junk": 1}
    a = StructuralSchema(RESERVATION).process(obj, status_subresource=True)
    b = StructuralSchema(RESERVATION).process(obj, status_subresource=False)
    assert (a.obj, a.unknown_fields, a.causes) == (b.obj, b.unknown_fields, b.causes)
    assert a.unknown_fields == ["spec.foo", "status.junk"]


def test_processing_a_2kb_object_is_fast():
    schema = StructuralSchema(NODESLO)
    memory = {"enable": True, "wmarkRatio": 95, "wmarkMinAdj": -25}
    obj = nodeslo(resourceUsedThresholdWithBE={"enable": True, "cpuSuppressThresholdPercent": 65,
                                               "cpuSuppressPolicy": "cpuset", "memoryEvictThresholdPercent": 70,
                                               "cpuEvictTimeWindowSeconds": 300},
                  resourceQOSStrategy={"beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1},
                                                   "memoryQOS": memory}},
                  extensions={"custom": {f"k{i}": {"v": i, "s": "x" * 10} for i in range(12)}},
                  hostApplications=[{"name": f"app-{i}", "qos": "LS", "cgroupPath": {"relativePath": f"app-{i}/"}}
                                    for i in range(10)])
    assert schema.process(obj).causes == []
    runs = 300
    start = time.perf_counter()
    for _ in range(runs):
        schema.process(obj)
    per_call = (time.perf_counter() - start) / runs
    # ~40 us on an idle core; the bound only catches accidental blow-ups on a loaded machine.
    assert per_call < 0.001, per_call


# --------------------------------------------------------------------------------------------- rendering


def test_values_render_like_go():
    assert [_go_float(f) for f in (0.5, 2.0, 1e21, 1e20, 0.0001, 0.00001, -3.25)] == [
        "0.5", "2", "1e+21", "100000000000000000000", "0.0001", "1e-05", "-3.25"]
    assert _go_json({"b": [1, 2.0, None, True], "a": "<x>"}) == '{"a":"\\u003cx\\u003e","b":[1,2,null,true]}'


# --------------------------------------------------------------------------------------------- CRD schemas


def causes_of(schema, **kw):
    return [(c["field"].replace(SCHEMA_PATH, "$"), c["reason"], c["message"])
            for c in check_crd_schema(schema, SCHEMA_PATH, **kw)]


def test_koordinator_schemas_are_structural():
    assert check_crd_schema(RESERVATION, SCHEMA_PATH) == []
    assert check_crd_schema(NODESLO, SCHEMA_PATH) == []


def test_missing_types_are_reported_where_required():
    schema = {"properties": {"spec": {"properties": {"items": {"type": "array", "items": {}}},
                                      "type": "object"},
                             "status": {}}}
    assert causes_of(schema) == [
        ("$.properties[spec].properties[items].items.type", "FieldValueRequired",
         "Required value: must not be empty for specified array items"),
        ("$.properties[status].type", "FieldValueRequired",
         "Required value: must not be empty for specified object fields"),
        ("$.type", "FieldValueRequired", "Required value: must not be empty at the root"),
    ]


def test_type_must_be_a_known_openapi_type():
    assert causes_of({"type": "object", "properties": {"spec": {"type": "int"}, "n": {"type": "null"}}}) == [
        ("$.properties[spec].type", "FieldValueNotSupported",
         'Unsupported value: "int": supported values: "array", "boolean", "integer", "number", "object", "string"'),
        ("$.properties[n].type", "FieldValueForbidden",
         "Forbidden: type cannot be set to null, use nullable as an alternative"),
        ("$.properties[n].type", "FieldValueNotSupported",
         'Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", "string"'),
    ]


def test_unknown_schema_keywords():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "minimun": 1}}}
    assert causes_of(schema) == [("$.properties[spec].minimun", "FieldValueForbidden", "Forbidden: unknown field")]
    unknown: list[str] = []
    assert check_crd_schema(schema, SCHEMA_PATH, unknown_fields=unknown) == []
    assert unknown == [f"{SCHEMA_PATH}.properties.spec.minimun"]


def test_unsupported_openapi_features():
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "$ref": "#/definitions/x", "additionalProperties": {"type": "string"},
        "properties": {"a": {"type": "string"}, "u": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
                       "p": {"type": "string", "x-kubernetes-preserve-unknown-fields": False}}}}}
    assert causes_of(schema) == [
        ("$.properties[spec].$ref", "FieldValueForbidden", "Forbidden: $ref is not supported"),
        ("$.properties[spec].additionalProperties", "FieldValueForbidden",
         "Forbidden: additionalProperties and properties are mutual exclusive"),
        ("$.properties[spec].properties[u].uniqueItems", "FieldValueForbidden",
         "Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"),
        ("$.properties[spec].properties[p].x-kubernetes-preserve-unknown-fields", "FieldValueInvalid",
         "Invalid value: false: must be true or undefined"),
    ]


def test_junctors_may_not_carry_structure():
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "string"}},
        "oneOf": [{"type": "object", "description": "one", "properties": {"b": {"required": ["x"]}}}]}}}
    assert causes_of(schema) == [
        ("$.properties[spec].oneOf[0].description", "FieldValueForbidden",
         "Forbidden: must be empty to be structural"),
        ("$.properties[spec].oneOf[0].type", "FieldValueForbidden", "Forbidden: must be empty to be structural"),
        ("$.properties[spec].properties[b]", "FieldValueRequired",
         f"Required value: because it is defined in {SCHEMA_PATH}.properties[spec].oneOf[0].properties[b]"),
    ]


def test_int_or_string_patterns_are_structural():
    port = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert check_crd_schema({"type": "object", "properties": {"port": port}}, SCHEMA_PATH) == []
    assert check_crd_schema({"type": "object", "properties": {"any": {"x-kubernetes-preserve-unknown-fields": True}}},
                            SCHEMA_PATH) == []


def test_root_and_metadata_restrictions():
    assert causes_of({"type": "array", "items": {"type": "string"}, "nullable": True}) == [
        ("$.nullable", "FieldValueForbidden", "Forbidden: nullable cannot be true at the root"),
        ("$.type", "FieldValueInvalid", 'Invalid value: "array": must be object at the root'),
    ]
    metadata = {"type": "object", "properties": {"name": {"type": "string"}, "labels": {"type": "object"}}}
    assert causes_of({"type": "object", "properties": {"metadata": metadata}}) == [
        ("$.properties[metadata]", "FieldValueForbidden",
         "Forbidden: must not specify anything other than name and generateName, but metadata is implicitly "
         "specified")]
    assert check_crd_schema({"type": "object", "properties": {"metadata": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}}}}, SCHEMA_PATH) == []


def test_defaults_must_be_pruned_valid_and_not_in_top_level_metadata():
    schema = {"type": "object", "properties": {
        "metadata": {"type": "object", "default": {}},
        "spec": {"type": "object", "properties": {
            "n": {"type": "integer", "default": "many"},
            "o": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}}}}}}
    assert causes_of(schema) == [
        ("$.properties[metadata].default", "FieldValueForbidden", "Forbidden: must not be set in top-level metadata"),
        ("$.properties[spec].properties[n].default", "FieldValueTypeInvalid",
         'Invalid value: "string":  in body must be of type integer: "string"'),
        ("$.properties[spec].properties[o].default", "FieldValueInvalid",
         'Invalid value: {"a":"x","b":1}: must not have unknown fields'),
    ]


def test_list_type_and_embedded_resource_rules():
    schema = {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "string"}},
        "keys": {"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": {"type": "object"}},
        "tmpl": {"type": "object", "x-kubernetes-embedded-resource": True}}}
    assert causes_of(schema) == [
        ("$.properties[ports].x-kubernetes-list-map-keys", "FieldValueRequired",
         "Required value: must not be empty if x-kubernetes-list-type is map"),
        ("$.properties[ports].items.type", "FieldValueInvalid",
         "Invalid value: \"string\": must be object if parent array's x-kubernetes-list-type is map"),
        ("$.properties[keys].x-kubernetes-list-type", "FieldValueRequired",
         "Required value: must be map if x-kubernetes-list-map-keys is non-empty"),
        ("$.properties[tmpl].properties", "FieldValueRequired",
         "Required value: must not be empty if x-kubernetes-embedded-resource is true without "
         "x-kubernetes-preserve-unknown-fields"),
    ]


def test_invalid_patterns_are_rejected():
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)"},
                                               "b": {"type": "string", "pattern": r"^\p{L}+$"}}}
    assert causes_of(schema) == [
        ("$.properties[a].pattern", "FieldValueInvalid",
         'Invalid value: "(?=x)": must be a valid regular expression, but isn\'t: error parsing regexp: invalid or '
         "unsupported Perl syntax: `(?=`")]


def test_array_without_items_and_non_object_schema():
    assert causes_of({"type": "object", "properties": {"xs": {"type": "array"}}}) == [
        ("$.properties[xs].items", "FieldValueRequired", "Required value: must be specified")]
    assert causes_of(["not", "a", "schema"]) == [("$", "FieldValueInvalid", 'Invalid value: "": must be an object')]
