"""Unit tests of the PATCH engines: RFC 6902 JSON patch, RFC 7386 merge patch, strategic merge patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from koordinator.apiserver.errors import StatusError
from koordinator.apiserver.patch import (
    MAX_JSON_PATCH_OPERATIONS,
    ListRule,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    strategy_for,
)


def containers_of(obj: Any) -> list[int]:
    """ids of every dict and list inside ``obj`` (to prove results share nothing with inputs)."""
    found: list[int] = []
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            found.append(id(value))
            stack.extend(value.values())
        elif isinstance(value, list):
            found.append(id(value))
            stack.extend(value)
    return found


def assert_independent(result: Any, *inputs: Any) -> None:
    shared = set(containers_of(result))
    for item in inputs:
        assert shared.isdisjoint(containers_of(item))


def status_of(excinfo: pytest.ExceptionInfo[StatusError]) -> tuple[int, str]:
    return excinfo.value.code, excinfo.value.reason


# ------------------------------------------------------------------------------------------
# JSON patch
# ------------------------------------------------------------------------------------------


class TestJsonPatchOps:
    def test_add_member_and_overwrite(self) -> None:
        doc = {"a": 1}
        assert apply_json_patch(doc, [{"op": "add", "path": "/b", "value": {"c": [1]}}]) == {"a": 1, "b": {"c": [1]}}
        assert apply_json_patch(doc, [{"op": "add", "path": "/a", "value": 2}]) == {"a": 2}

    def test_add_into_array(self) -> None:
        doc = {"l": ["x", "y"]}
        assert apply_json_patch(doc, [{"op": "add", "path": "/l/0", "value": "w"}]) == {"l": ["w", "x", "y"]}
        assert apply_json_patch(doc, [{"op": "add", "path": "/l/2", "value": "z"}]) == {"l": ["x", "y", "z"]}
        assert apply_json_patch(doc, [{"op": "add", "path": "/l/-", "value": "z"}]) == {"l": ["x", "y", "z"]}

    def test_add_null_value_is_a_value(self) -> None:
        assert apply_json_patch({}, [{"op": "add", "path": "/a", "value": None}]) == {"a": None}

    def test_add_whole_document(self) -> None:
        assert apply_json_patch({"a": 1}, [{"op": "add", "path": "", "value": {"b": 2}}]) == {"b": 2}

    def test_remove(self) -> None:
        doc = {"a": 1, "b": 2, "l": [1, 2, 3]}
        assert apply_json_patch(doc, [{"op": "remove", "path": "/a"}]) == {"b": 2, "l": [1, 2, 3]}
        assert apply_json_patch(doc, [{"op": "remove", "path": "/l/1"}]) == {"a": 1, "b": 2, "l": [1, 3]}

    def test_replace(self) -> None:
        doc = {"a": {"b": 1}, "l": [1, 2]}
        assert apply_json_patch(doc, [{"op": "replace", "path": "/a/b", "value": "x"}]) == {"a": {"b": "x"}, "l": [1, 2]}
        assert apply_json_patch(doc, [{"op": "replace", "path": "/l/1", "value": 9}]) == {"a": {"b": 1}, "l": [1, 9]}
        assert apply_json_patch(doc, [{"op": "replace", "path": "", "value": {"z": 0}}]) == {"z": 0}

    def test_move(self) -> None:
        doc = {"a": {"b": 1}, "c": {}, "l": ["x", "y", "z"]}
        assert apply_json_patch(doc, [{"op": "move", "from": "/a/b", "path": "/c/d"}]) == {
            "a": {}, "c": {"d": 1}, "l": ["x", "y", "z"]}
        moved = apply_json_patch(doc, [{"op": "move", "from": "/l/0", "path": "/l/-"}])
        assert moved["l"] == ["y", "z", "x"]

    def test_move_to_same_path_is_a_no_op(self) -> None:
        assert apply_json_patch({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}]) == {"a": 1}

    def test_move_into_own_child_is_invalid(self) -> None:
        with pytest.raises(StatusError) as exc:
            apply_json_patch({"a": {"b": {}}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}])
        assert status_of(exc) == (422, "Invalid")
        assert "own child" in exc.value.message

    def test_copy_is_deep(self) -> None:
        doc = {"a": {"b": [1]}}
        out = apply_json_patch(doc, [
            {"op": "copy", "from": "/a", "path": "/c"},
            {"op": "add", "path": "/c/b/-", "value": 2},
        ])
        assert out == {"a": {"b": [1]}, "c": {"b": [1, 2]}}

    def test_test_op_passes_with_json_equality(self) -> None:
        doc = {"n": 1, "o": {"x": [1, "a", None, True]}}
        ops = [
            {"op": "test", "path": "/n", "value": 1.0},
            {"op": "test", "path": "/o", "value": {"x": [1, "a", None, True]}},
            {"op": "test", "path": "", "value": doc},
        ]
        assert apply_json_patch(doc, ops) == doc

    @pytest.mark.parametrize("expected", [2, "1", True, None, [1]])
    def test_failing_test_op_is_422(self, expected: Any) -> None:
        with pytest.raises(StatusError) as exc:
            apply_json_patch({"n": 1}, [{"op": "test", "path": "/n", "value": expected}])
        assert status_of(exc) == (422, "Invalid")
        assert "#0 (test) failed" in exc.value.message and "/n" in exc.value.message

    def test_failed_op_applies_nothing(self) -> None:
        doc = {"a": 1}
        snapshot = copy.deepcopy(doc)
        with pytest.raises(StatusError):
            apply_json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 3}])
        assert doc == snapshot

    def test_operations_see_earlier_ones(self) -> None:
        ops = [
            {"op": "add", "path": "/l", "value": []},
            {"op": "add", "path": "/l/-", "value": 1},
            {"op": "add", "path": "/l/-", "value": 2},
            {"op": "test", "path": "/l", "value": [1, 2]},
        ]
        assert apply_json_patch({}, ops) == {"l": [1, 2]}


class TestJsonPatchPointers:
    def test_escapes(self) -> None:
        doc = {"a/b": 1, "m~n": 2, "~1": 3}
        assert apply_json_patch(doc, [{"op": "replace", "path": "/a~1b", "value": 10}])["a/b"] == 10
        assert apply_json_patch(doc, [{"op": "replace", "path": "/m~0n", "value": 20}])["m~n"] == 20
        # ~01 is "~" then "1", never "/"
        assert apply_json_patch(doc, [{"op": "remove", "path": "/~01"}]) == {"a/b": 1, "m~n": 2}

    def test_annotation_key_with_slash(self) -> None:
        doc = {"metadata": {"annotations": {}}}
        out = apply_json_patch(doc, [{"op": "add", "path": "/metadata/annotations/example.com~1k", "value": "v"}])
        assert out == {"metadata": {"annotations": {"example.com/k": "v"}}}

    def test_dash_is_a_plain_key_in_objects(self) -> None:
        assert apply_json_patch({}, [{"op": "add", "path": "/-", "value": 1}]) == {"-": 1}

    def test_empty_key(self) -> None:
        assert apply_json_patch({"": 1}, [{"op": "replace", "path": "/", "value": 2}]) == {"": 2}

    @pytest.mark.parametrize("path", ["a", "a/b"])
    def test_pointer_without_leading_slash_is_400(self, path: str) -> None:
        with pytest.raises(StatusError) as exc:
            apply_json_patch({"a": 1}, [{"op": "remove", "path": path}])
        assert status_of(exc) == (400, "BadRequest")
        assert "#0" in exc.value.message

    @pytest.mark.parametrize("path", ["/a~2", "/a~", "/~~01", "/a~0~"])
    def test_bad_escape_is_400(self, path: str) -> None:
        with pytest.raises(StatusError) as exc:
            apply_json_patch({"a": 1}, [{"op": "add", "path": path, "value": 1}])
        assert status_of(exc) == (400, "BadRequest")
        assert "escape" in exc.value.message

    @pytest.mark.parametrize("op", [
        {"op": "remove", "path": "/missing"},
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "test", "path": "/missing", "value": 1},
        {"op": "add", "path": "/missing/child", "value": 1},
        {"op": "add", "path": "/a/child", "value": 1},  # /a is a number
        {"op": "move", "from": "/missing", "path": "/b"},
        {"op": "copy", "from": "/missing", "path": "/b"},
        {"op": "remove", "path": ""},
    ])
    def test_paths_that_do_not_exist_are_422(self, op: dict) -> None:
        with pytest.raises(StatusError) as exc:
            apply_json_patch({"a": 1, "l": [0]}, [op])
        assert status_of(exc) == (422, "Invalid")
        assert f"({op['op']})" in exc.value.message

    @pytest.mark.parametrize("op", [
        {"op": "add", "path": "/l/3", "value": 1},
        {"op": "replace", "path": "/l/2", "value": 1},
        {"op": "remove", "path": "/l/-"},
        {"op": "replace", "path": "/l/-", "value": 1},
        {"op": "remove", "path": "/l/01"},
        {"op": "remove", "path": "/l/-1"},
        {"op": "remove", "path": "/l/+1"},
        {"op": "remove", "path": "/l/x"},
        {"op": "add", "path": "/l/1/x", "value": 1},
        {"op": "test", "path": "/l/5", "value": 1},
    ])
    def test_bad_array_indexes_are_422(self, op: dict) -> None:
        doc = {"l": ["a", "b"]}
        with pytest.raises(StatusError) as exc:
            apply_json_patch(doc, [op])
        assert status_of(exc) == (422, "Invalid")
        assert doc == {"l": ["a", "b"]}


class TestJsonPatchShape:
    @pytest.mark.parametrize("ops", [{"op": "add"}, "x", None])
    def test_not_a_list(self, ops: Any) -> None:
        with pytest.raises(StatusError) as exc:
            apply_json_patch({}, ops)
        assert status_of(exc) == (400, "BadRequest")
        assert "array" in exc.value.message

    @pytest.mark.parametrize(("op", "fragment"), [
        ("add", "must be a JSON object"),
        ({"path": "/a", "value": 1}, 'missing the "op" field'),
        ({"op": "frob", "path": "/a"}, "unknown op 'frob'"),
        ({"op": 3, "path": "/a"}, "unknown op 3"),
        ({"op": "add", "value": 1}, 'missing the "path" field'),
        ({"op": "add", "path": 5, "value": 1}, '"path" must be a string'),
        ({"op": "add", "path": "/a"}, 'missing the "value" field'),
        ({"op": "replace", "path": "/a"}, 'missing the "value" field'),
        ({"op": "test", "path": "/a"}, 'missing the "value" field'),
        ({"op": "move", "path": "/a"}, 'missing the "from" field'),
        ({"op": "copy", "path": "/a", "from": 1}, '"from" must be a string'),
        ({"op": "copy", "path": "/a", "from": "x"}, "JSON pointer"),
    ])
    def test_bad_operation_is_400_naming_its_index(self, op: Any, fragment: str) -> None:
        ops = [{"op": "test", "path": "/a", "value": 1}, op]
        with pytest.raises(StatusError) as exc:
            apply_json_patch({"a": 1}, ops)
        assert status_of(exc) == (400, "BadRequest")
        assert "#1" in exc.value.message
        assert fragment in exc.value.message

    def test_shape_is_checked_before_anything_applies(self) -> None:
        # op #0 would fail with 422, but the malformed op #1 makes the whole patch a bad request
        with pytest.raises(StatusError) as exc:
            apply_json_patch({}, [{"op": "remove", "path": "/nope"}, {"op": "add"}])
        assert exc.value.code == 400

    def test_too_many_operations_is_413(self) -> None:
        ops = [{"op": "test", "path": "", "value": {}}] * (MAX_JSON_PATCH_OPERATIONS + 1)
        with pytest.raises(StatusError) as exc:
            apply_json_patch({}, ops)
        assert status_of(exc) == (413, "RequestEntityTooLarge")
        assert apply_json_patch({}, ops[:MAX_JSON_PATCH_OPERATIONS]) == {}

    def test_empty_patch_returns_a_copy(self) -> None:
        doc = {"a": {"b": [1]}}
        out = apply_json_patch(doc, [])
        assert out == doc
        assert_independent(out, doc)


class TestJsonPatchIsolation:
    def test_inputs_not_mutated_and_results_independent(self) -> None:
        doc = {"metadata": {"labels": {"a": "1"}}, "spec": {"l": [{"x": 1}, {"x": 2}]}}
        value = {"deep": {"list": [1, 2]}}
        ops = [
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/spec/l/0"},
            {"op": "add", "path": "/spec/v", "value": value},
            {"op": "add", "path": "/spec/v/deep/list/-", "value": 3},
            {"op": "move", "from": "/metadata/labels/a", "path": "/spec/moved"},
        ]
        doc_before, ops_before = copy.deepcopy(doc), copy.deepcopy(ops)
        out = apply_json_patch(doc, ops)
        assert doc == doc_before and ops == ops_before
        assert out == {"metadata": {"labels": {"b": "2"}},
                       "spec": {"l": [{"x": 2}], "v": {"deep": {"list": [1, 2, 3]}}, "moved": "1"}}
        assert_independent(out, doc, ops)


# ------------------------------------------------------------------------------------------
# JSON merge patch
# ------------------------------------------------------------------------------------------


class TestMergePatch:
    @pytest.mark.parametrize(("target", "patch", "result"), [
        # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ])
    def test_rfc_examples(self, target: dict, patch: dict, result: dict) -> None:
        assert apply_merge_patch(target, patch) == result

    def test_null_deletes_nested_keys(self) -> None:
        doc = {"metadata": {"labels": {"a": "1", "b": "2"}, "annotations": {"x": "y"}}}
        out = apply_merge_patch(doc, {"metadata": {"labels": {"a": None}, "annotations": None}})
        assert out == {"metadata": {"labels": {"b": "2"}}}

    def test_lists_are_replaced_wholesale(self) -> None:
        doc = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}}
        out = apply_merge_patch(doc, {"spec": {"containers": [{"name": "b", "image": "3"}]}})
        assert out == {"spec": {"containers": [{"name": "b", "image": "3"}]}}

    def test_nulls_inside_lists_are_kept(self) -> None:
        assert apply_merge_patch({}, {"l": [None, {"a": None}]}) == {"l": [None, {"a": None}]}

    def test_key_order(self) -> None:
        out = apply_merge_patch({"a": 1, "b": 2, "c": 3}, {"d": 4, "b": 5})
        assert list(out) == ["a", "b", "c", "d"]

    def test_inputs_not_mutated_and_results_independent(self) -> None:
        doc = {"a": {"b": [1, {"c": 2}]}, "keep": {"k": [1]}}
        patch = {"a": {"x": {"y": [1]}}, "n": {"deep": {}}}
        doc_before, patch_before = copy.deepcopy(doc), copy.deepcopy(patch)
        out = apply_merge_patch(doc, patch)
        assert doc == doc_before and patch == patch_before
        assert out == {"a": {"b": [1, {"c": 2}], "x": {"y": [1]}}, "keep": {"k": [1]}, "n": {"deep": {}}}
        assert_independent(out, doc, patch)


# ------------------------------------------------------------------------------------------
# Strategic merge patch
# ------------------------------------------------------------------------------------------


def make_pod() -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}, "finalizers": ["a", "b"]},
        "spec": {
            "containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 80, "protocol": "TCP"}],
                 "args": ["--x", "--y"]},
                {"name": "sidecar", "image": "side:1", "env": [{"name": "S", "value": "s"}]},
            ],
            "tolerations": [{"key": "k1", "operator": "Exists"}],
            "nodeSelector": {"zone": "a", "disk": "ssd"},
            "volumes": [{"name": "v1", "emptyDir": {}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "ContainersNotReady"},
            ],
        },
    }


def smp_pod(patch: dict, pod: dict | None = None) -> dict:
    return apply_strategic_merge_patch(pod if pod is not None else make_pod(), patch, "", "Pod")


def by_name(items: list[dict]) -> dict[str, dict]:
    return {item["name"]: item for item in items}


class TestStrategicContainers:
    def test_change_one_containers_image(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}})
        containers = out["spec"]["containers"]
        assert [c["name"] for c in containers] == ["app", "sidecar"]
        assert containers[1] == {"name": "sidecar", "image": "side:2", "env": [{"name": "S", "value": "s"}]}
        assert containers[0] == make_pod()["spec"]["containers"][0]

    def test_add_env_to_one_container_keeping_others(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "app", "env": [{"name": "C", "value": "3"}]}]}})
        app, sidecar = out["spec"]["containers"]
        assert {e["name"]: e["value"] for e in app["env"]} == {"A": "1", "B": "2", "C": "3"}
        assert app["image"] == "app:1" and app["args"] == ["--x", "--y"]
        assert sidecar == make_pod()["spec"]["containers"][1]

    def test_env_merges_by_name(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "app", "env": [
            {"name": "B", "value": "two"}, {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}]}})
        env = out["spec"]["containers"][0]["env"]
        assert by_name(env) == {"A": {"name": "A", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
                                "B": {"name": "B", "value": "two"}}

    def test_null_in_merged_element_deletes_the_field(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": None}]}]}})
        assert out["spec"]["containers"][0]["env"][0] == {"name": "A"}

    def test_new_container_goes_first_like_kube_apiserver(self) -> None:
        # apimachinery puts patch items not on the server ahead of the server-only items.
        out = smp_pod({"spec": {"containers": [{"name": "new", "image": "n:1"}]}})
        assert [c["name"] for c in out["spec"]["containers"]] == ["new", "app", "sidecar"]

    def test_patch_order_interleaves_with_server_order(self) -> None:
        pod = make_pod()
        pod["spec"]["containers"].append({"name": "third", "image": "t"})
        out = smp_pod({"spec": {"containers": [{"name": "sidecar", "image": "s2"}, {"name": "new"}]}}, pod)
        assert [c["name"] for c in out["spec"]["containers"]] == ["app", "sidecar", "new", "third"]

    def test_ports_merge_by_container_port(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "app", "ports": [
            {"containerPort": 80, "name": "http"}, {"containerPort": 443}]}]}})
        ports = out["spec"]["containers"][0]["ports"]
        assert {"containerPort": 80, "protocol": "TCP", "name": "http"} in ports
        assert {"containerPort": 443} in ports and len(ports) == 2

    def test_delete_directive_removes_a_container(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}})
        assert [c["name"] for c in out["spec"]["containers"]] == ["app"]

    def test_delete_directive_for_missing_element_is_harmless(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "ghost", "$patch": "delete"}]}})
        assert [c["name"] for c in out["spec"]["containers"]] == ["app", "sidecar"]

    def test_delete_directive_without_merge_key_is_400(self) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod({"spec": {"containers": [{"$patch": "delete"}]}})
        assert status_of(exc) == (400, "BadRequest")
        assert "merge key: name" in exc.value.message

    def test_element_without_merge_key_is_400(self) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod({"spec": {"containers": [{"image": "x"}]}})
        assert exc.value.code == 400 and "merge key: name" in exc.value.message

    def test_non_object_element_in_keyed_list_is_400(self) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod({"spec": {"containers": ["app"]}})
        assert exc.value.code == 400

    def test_replace_directive_in_a_list(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "only", "image": "o:1"}, {"$patch": "replace"}]}})
        assert out["spec"]["containers"] == [{"name": "only", "image": "o:1"}]

    def test_merge_directive_is_the_default(self) -> None:
        out = smp_pod({"spec": {"$patch": "merge", "containers": [
            {"name": "app", "image": "app:2", "$patch": "merge"}]}})
        assert [c["image"] for c in out["spec"]["containers"]] == ["app:2", "side:1"]
        assert out["spec"]["nodeSelector"] == {"zone": "a", "disk": "ssd"}

    def test_volumes_merge_by_name(self) -> None:
        out = smp_pod({"spec": {"volumes": [{"name": "v2", "configMap": {"name": "cm"}}]}})
        assert by_name(out["spec"]["volumes"]) == {"v1": {"name": "v1", "emptyDir": {}},
                                                   "v2": {"name": "v2", "configMap": {"name": "cm"}}}


class TestStrategicMaps:
    def test_replace_directive_in_a_map(self) -> None:
        out = smp_pod({"spec": {"nodeSelector": {"$patch": "replace", "zone": "b"}}})
        assert out["spec"]["nodeSelector"] == {"zone": "b"}

    def test_replace_directive_on_labels(self) -> None:
        out = smp_pod({"metadata": {"labels": {"$patch": "replace", "new": "1"}}})
        assert out["metadata"]["labels"] == {"new": "1"}
        assert out["metadata"]["name"] == "p"

    def test_delete_directive_empties_an_existing_map(self) -> None:
        # apimachinery's mergeMap answers an empty map for "$patch: delete".
        out = smp_pod({"spec": {"nodeSelector": {"$patch": "delete"}}})
        assert out["spec"]["nodeSelector"] == {}

    def test_delete_directive_on_an_absent_map_adds_nothing(self) -> None:
        out = smp_pod({"spec": {"affinity": {"$patch": "delete"}}})
        assert "affinity" not in out["spec"]

    def test_delete_directive_on_the_whole_object(self) -> None:
        assert smp_pod({"$patch": "delete"}) == {}

    def test_null_deletes_keys(self) -> None:
        out = smp_pod({"metadata": {"labels": {"app": None}}, "spec": {"nodeSelector": None}})
        assert out["metadata"]["labels"] == {}
        assert "nodeSelector" not in out["spec"]

    def test_nulls_matching_nothing_are_dropped(self) -> None:
        out = smp_pod({"spec": {"affinity": {"nodeAffinity": None, "podAffinity": {"x": None}}, "absent": None}})
        assert out["spec"]["affinity"] == {"podAffinity": {}}
        assert "absent" not in out["spec"]

    def test_retain_keys(self) -> None:
        deploy = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
        out = apply_strategic_merge_patch(
            deploy, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}, "apps", "Deployment")
        assert out == {"spec": {"strategy": {"type": "Recreate"}}}

    def test_retain_keys_keeps_listed_fields_from_the_server(self) -> None:
        out = smp_pod({"spec": {"$retainKeys": ["containers", "volumes", "nodeSelector"],
                                "nodeSelector": {"zone": "c"}}})
        assert set(out["spec"]) == {"containers", "volumes", "nodeSelector"}
        assert out["spec"]["nodeSelector"] == {"zone": "c", "disk": "ssd"}

    def test_retain_keys_must_cover_the_patch(self) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod({"spec": {"$retainKeys": ["volumes"], "nodeSelector": {"zone": "c"}}})
        assert status_of(exc) == (400, "BadRequest")
        assert "retainKeys" in exc.value.message and "nodeSelector" in exc.value.message

    def test_retain_keys_must_be_a_list_of_names(self) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod({"spec": {"$retainKeys": "volumes"}})
        assert exc.value.code == 400

    def test_type_change_replaces(self) -> None:
        out = smp_pod({"spec": {"nodeSelector": ["odd"], "containers": {"not": "a list"}}})
        assert out["spec"]["nodeSelector"] == ["odd"]
        assert out["spec"]["containers"] == {"not": "a list"}


class TestStrategicPrimitiveLists:
    def test_finalizers_union(self) -> None:
        out = smp_pod({"metadata": {"finalizers": ["b", "c", "c"]}})
        assert sorted(out["metadata"]["finalizers"]) == ["a", "b", "c"]
        assert len(out["metadata"]["finalizers"]) == 3

    def test_finalizers_order_follows_kube_apiserver(self) -> None:
        assert smp_pod({"metadata": {"finalizers": ["b", "c"]}})["metadata"]["finalizers"] == ["a", "b", "c"]
        assert smp_pod({"metadata": {"finalizers": ["c"]}})["metadata"]["finalizers"] == ["c", "a", "b"]

    def test_empty_list_is_a_no_op_for_a_merge_list(self) -> None:
        assert smp_pod({"metadata": {"finalizers": []}})["metadata"]["finalizers"] == ["a", "b"]

    def test_null_clears_a_merge_list(self) -> None:
        assert "finalizers" not in smp_pod({"metadata": {"finalizers": None}})["metadata"]

    def test_finalizers_added_where_none_were(self) -> None:
        pod = make_pod()
        del pod["metadata"]["finalizers"]
        assert smp_pod({"metadata": {"finalizers": ["x"]}}, pod)["metadata"]["finalizers"] == ["x"]

    def test_delete_from_primitive_list(self) -> None:
        out = smp_pod({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zzz"]}})
        assert out["metadata"]["finalizers"] == ["b"]

    def test_delete_from_primitive_list_with_additions(self) -> None:
        out = smp_pod({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"]}})
        assert sorted(out["metadata"]["finalizers"]) == ["b", "c"]

    def test_delete_from_absent_list_is_harmless(self) -> None:
        out = smp_pod({"metadata": {"$deleteFromPrimitiveList/nothing": ["a"]}})
        assert "nothing" not in out["metadata"]

    def test_delete_from_primitive_list_needs_a_list(self) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}})
        assert exc.value.code == 400 and "primitive list" in exc.value.message

    def test_node_pod_cidrs_union(self) -> None:
        node = {"spec": {"podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "a", "effect": "NoSchedule"}]}}
        out = apply_strategic_merge_patch(node, {"spec": {"podCIDRs": ["fd00::/64"]}}, "", "Node")
        assert sorted(out["spec"]["podCIDRs"]) == ["10.0.0.0/24", "fd00::/64"]


class TestSetElementOrder:
    def test_reorders_the_merged_list(self) -> None:
        out = smp_pod({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}],
                                "containers": [{"name": "app", "image": "app:2"}]}})
        assert [(c["name"], c["image"]) for c in out["spec"]["containers"]] == [("sidecar", "side:1"), ("app", "app:2")]

    def test_kubectl_apply_shape_with_new_element(self) -> None:
        out = smp_pod({"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "extra"}, {"name": "sidecar"}],
            "containers": [{"name": "extra", "image": "e:1"}]}})
        assert [c["name"] for c in out["spec"]["containers"]] == ["app", "extra", "sidecar"]

    def test_order_without_list_in_patch(self) -> None:
        out = smp_pod({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}})
        assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "app"]

    def test_unlisted_server_items_stay(self) -> None:
        pod = make_pod()
        pod["spec"]["containers"].append({"name": "injected"})
        out = smp_pod({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}}, pod)
        names = [c["name"] for c in out["spec"]["containers"]]
        assert sorted(names) == ["app", "injected", "sidecar"]
        assert names.index("sidecar") < names.index("app")

    def test_primitive_list_order(self) -> None:
        out = smp_pod({"metadata": {"$setElementOrder/finalizers": ["b", "c", "a"], "finalizers": ["c"]}})
        assert out["metadata"]["finalizers"] == ["b", "c", "a"]

    def test_env_order_inside_a_container(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "app", "$setElementOrder/env": [{"name": "B"}, {"name": "A"}]}]}})
        assert [e["name"] for e in out["spec"]["containers"][0]["env"]] == ["B", "A"]

    @pytest.mark.parametrize("order", [
        "not-a-list",
        [{"name": "app"}],  # a patch item missing from the order list
        [{"wrong": "key"}, 5, None],
        [],
    ])
    def test_malformed_order_never_fails(self, order: Any) -> None:
        out = smp_pod({"spec": {"$setElementOrder/containers": order,
                                "containers": [{"name": "sidecar", "image": "side:2"}]}})
        assert sorted(c["name"] for c in out["spec"]["containers"]) == ["app", "sidecar"]
        assert by_name(out["spec"]["containers"])["sidecar"]["image"] == "side:2"

    def test_order_for_unknown_or_unmerged_fields_is_ignored(self) -> None:
        out = smp_pod({"spec": {"$setElementOrder/tolerations": [{"key": "zz"}], "$setElementOrder/": [1],
                                "$setElementOrder/nothing": ["x"]}})
        assert out["spec"]["tolerations"] == [{"key": "k1", "operator": "Exists"}]
        assert "nothing" not in out["spec"]


class TestStrategicDirectives:
    @pytest.mark.parametrize("patch", [
        {"spec": {"$frobnicate": 1}},
        {"metadata": {"labels": {"$bogus": "x"}}},
        {"spec": {"containers": [{"name": "app", "$weird": True}]}},
    ])
    def test_unknown_directive_is_400(self, patch: dict) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod(patch)
        assert status_of(exc) == (400, "BadRequest")
        name = next(k for k in str(patch).replace("'", " ").split() if k.startswith("$"))
        assert name in exc.value.message

    @pytest.mark.parametrize("patch", [
        {"spec": {"$patch": "explode"}},
        {"spec": {"containers": [{"name": "app", "$patch": "explode"}]}},
    ])
    def test_unknown_patch_type_is_400(self, patch: dict) -> None:
        with pytest.raises(StatusError) as exc:
            smp_pod(patch)
        assert exc.value.code == 400 and "explode" in exc.value.message

    def test_json_schema_dollar_fields_are_plain_fields(self) -> None:
        crd = {"spec": {"versions": [{"schema": {"openAPIV3Schema": {"type": "object"}}}]}}
        patch = {"spec": {"versions": [{"schema": {"openAPIV3Schema": {"$schema": "x", "$ref": "#/y"}}}]}}
        out = apply_strategic_merge_patch(crd, patch, "apiextensions.k8s.io", "CustomResourceDefinition")
        assert out["spec"]["versions"] == [{"schema": {"openAPIV3Schema": {"$schema": "x", "$ref": "#/y"}}}]

    def test_directives_in_new_values_are_applied_not_stored(self) -> None:
        out = smp_pod({"spec": {"initContainers": [
            {"name": "i", "env": [{"name": "X", "$patch": "delete"}, {"name": "Y", "value": "y"}]},
            {"$patch": "replace"},
        ]}})
        assert out["spec"]["initContainers"] == [{"name": "i", "env": [{"name": "Y", "value": "y"}]}]

    def test_patch_must_be_an_object(self) -> None:
        with pytest.raises(StatusError) as exc:
            apply_strategic_merge_patch({}, [], "", "Pod")  # type: ignore[arg-type]
        assert exc.value.code == 400


class TestStrategicListsWithoutStrategy:
    def test_tolerations_are_replaced(self) -> None:
        out = smp_pod({"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}})
        assert out["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]

    def test_container_args_are_replaced(self) -> None:
        out = smp_pod({"spec": {"containers": [{"name": "app", "args": ["--z"]}]}})
        assert out["spec"]["containers"][0]["args"] == ["--z"]

    def test_node_taints_images_and_volumes_attached_are_replaced(self) -> None:
        node = {"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
                "status": {"images": [{"names": ["a"]}], "volumesAttached": [{"name": "v", "devicePath": "/d"}]}}
        patch = {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
                 "status": {"images": [{"names": ["b"]}], "volumesAttached": []}}
        out = apply_strategic_merge_patch(node, patch, "", "Node")
        assert out == patch

    def test_container_statuses_are_replaced(self) -> None:
        pod = make_pod()
        pod["status"]["containerStatuses"] = [{"name": "app", "ready": False}, {"name": "sidecar", "ready": True}]
        out = smp_pod({"status": {"containerStatuses": [{"name": "app", "ready": True}]}}, pod)
        assert out["status"]["containerStatuses"] == [{"name": "app", "ready": True}]

    def test_managed_fields_are_replaced(self) -> None:
        pod = make_pod()
        pod["metadata"]["managedFields"] = [{"manager": "a"}, {"manager": "b"}]
        out = smp_pod({"metadata": {"managedFields": [{"manager": "c"}]}}, pod)
        assert out["metadata"]["managedFields"] == [{"manager": "c"}]

    def test_replace_directive_on_a_list_without_strategy(self) -> None:
        out = smp_pod({"spec": {"tolerations": [{"key": "k3"}, {"$patch": "replace"}]}})
        assert out["spec"]["tolerations"] == [{"key": "k3"}]


class TestStrategicStatus:
    def test_pod_conditions_merge_by_type(self) -> None:
        out = smp_pod({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None}]}})
        assert out["status"]["conditions"] == [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True"},
        ]
        assert out["status"]["phase"] == "Pending"

    def test_pod_condition_added(self) -> None:
        out = smp_pod({"status": {"conditions": [{"type": "Initialized", "status": "True"}]}})
        assert {c["type"] for c in out["status"]["conditions"]} == {"PodScheduled", "Ready", "Initialized"}

    def test_pod_ips_merge_by_ip(self) -> None:
        pod = make_pod()
        pod["status"]["podIPs"] = [{"ip": "10.0.0.1"}]
        out = smp_pod({"status": {"podIPs": [{"ip": "fd00::1"}]}}, pod)
        assert sorted(i["ip"] for i in out["status"]["podIPs"]) == ["10.0.0.1", "fd00::1"]

    def test_node_conditions_and_addresses_merge_by_type(self) -> None:
        node = {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"},
                           {"type": "MemoryPressure", "status": "False"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}],
        }}
        patch = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NotReady"}],
                            "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}
        out = apply_strategic_merge_patch(node, patch, "", "Node")
        assert out["status"]["conditions"] == [{"type": "Ready", "status": "False", "reason": "NotReady"},
                                               {"type": "MemoryPressure", "status": "False"}]
        assert out["status"]["addresses"] == [{"type": "InternalIP", "address": "10.0.0.2"},
                                              {"type": "Hostname", "address": "n1"}]

    @pytest.mark.parametrize(("group", "kind"), [
        ("apps", "Deployment"), ("apps", "DaemonSet"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
        ("batch", "Job"), ("policy", "PodDisruptionBudget"),
    ])
    def test_workload_conditions_merge_by_type(self, group: str, kind: str) -> None:
        obj = {"status": {"conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}]}}
        out = apply_strategic_merge_patch(obj, {"status": {"conditions": [{"type": "Progressing", "status": "False"}]}},
                                          group, kind)
        assert out["status"]["conditions"] == [{"type": "Available", "status": "True"},
                                               {"type": "Progressing", "status": "False"}]


class TestStrategicKinds:
    @pytest.mark.parametrize(("group", "kind", "prefix"), [
        ("apps", "Deployment", ["spec", "template", "spec"]),
        ("apps", "DaemonSet", ["spec", "template", "spec"]),
        ("apps", "ReplicaSet", ["spec", "template", "spec"]),
        ("apps", "StatefulSet", ["spec", "template", "spec"]),
        ("batch", "Job", ["spec", "template", "spec"]),
        ("batch", "CronJob", ["spec", "jobTemplate", "spec", "template", "spec"]),
    ])
    def test_pod_templates_merge_containers(self, group: str, kind: str, prefix: list[str]) -> None:
        def nest(leaf: dict) -> dict:
            for key in reversed(prefix):
                leaf = {key: leaf}
            return leaf

        obj = nest({"containers": [{"name": "a", "image": "a:1", "env": [{"name": "E", "value": "1"}]},
                                   {"name": "b", "image": "b:1"}]})
        patch = nest({"containers": [{"name": "a", "env": [{"name": "F", "value": "2"}]}]})
        out = apply_strategic_merge_patch(obj, patch, group, kind)
        spec = out
        for key in prefix:
            spec = spec[key]
        assert [c["name"] for c in spec["containers"]] == ["a", "b"]
        assert by_name(spec["containers"][0]["env"]) == {"E": {"name": "E", "value": "1"}, "F": {"name": "F", "value": "2"}}

    def test_service_ports_merge_by_port(self) -> None:
        svc = {"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}
        out = apply_strategic_merge_patch(svc, {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}, "", "Service")
        assert out["spec"]["ports"] == [{"port": 80, "targetPort": 9090}, {"port": 443}]

    def test_owner_references_merge_by_uid(self) -> None:
        obj = {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}, {"uid": "2", "name": "b"}]}}
        patch = {"metadata": {"ownerReferences": [{"uid": "2", "controller": True}]}}
        out = apply_strategic_merge_patch(obj, patch, "", "ConfigMap")
        assert out["metadata"]["ownerReferences"] == [{"uid": "1", "name": "a"},
                                                      {"uid": "2", "name": "b", "controller": True}]

    def test_endpoints_subsets_are_replaced(self) -> None:
        ep = {"subsets": [{"addresses": [{"ip": "1.1.1.1"}]}]}
        out = apply_strategic_merge_patch(ep, {"subsets": [{"addresses": [{"ip": "2.2.2.2"}]}]}, "", "Endpoints")
        assert out == {"subsets": [{"addresses": [{"ip": "2.2.2.2"}]}]}

    def test_strategy_table(self) -> None:
        pod = strategy_for("", "Pod")
        assert pod["spec"]["containers"].key == "name"
        container = pod["spec"]["containers"].item
        assert container is not None
        assert {f: container[f].key for f in container} == {
            "ports": "containerPort", "env": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath"}
        assert pod["metadata"]["finalizers"] == ListRule(None, None)
        assert pod["metadata"]["ownerReferences"].key == "uid"
        for absent in ("tolerations", "readinessGates"):
            assert absent not in pod["spec"]
        assert "resizePolicy" not in container
        assert "containerStatuses" not in pod["status"]
        assert pod["status"]["conditions"].key == "type"
        node = strategy_for("", "Node")
        assert "taints" not in node["spec"] and node["spec"]["podCIDRs"].key is None
        cron = strategy_for("batch", "CronJob")
        assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"].key == "name"
        assert dict(strategy_for("", "ConfigMap")) == {"metadata": pod["metadata"]}
        with pytest.raises(TypeError):
            pod["spec"]["containers"] = None  # type: ignore[index]


class TestStrategicIsolation:
    def test_inputs_not_mutated_and_results_independent(self) -> None:
        pod = make_pod()
        patch = {
            "metadata": {"labels": {"new": "1"}, "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}, {"name": "n"}],
                "containers": [{"name": "app", "env": [{"name": "A", "value": "x"}]},
                               {"name": "n", "env": [{"name": "Z"}]}],
                "tolerations": [{"key": "t"}],
                "nodeSelector": {"$patch": "replace", "only": "this"},
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
        pod_before, patch_before = copy.deepcopy(pod), copy.deepcopy(patch)
        out = apply_strategic_merge_patch(pod, patch, "", "Pod")
        assert pod == pod_before and patch == patch_before
        assert_independent(out, pod, patch)
        assert [c["name"] for c in out["spec"]["containers"]] == ["sidecar", "app", "n"]
        assert out["metadata"]["finalizers"] == ["b"]

    def test_untouched_result_is_an_independent_copy(self) -> None:
        pod = make_pod()
        out = smp_pod({}, pod)
        assert out == pod
        assert_independent(out, pod)
        out["metadata"]["labels"]["mutated"] = "yes"
        assert "mutated" not in pod["metadata"]["labels"]
