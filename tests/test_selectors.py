"""Label, field and node selector semantics (apimachinery labels/fields, nodeaffinity)."""

from __future__ import annotations

import pytest

from koordinator.apis.selectors import (
    DOES_NOT_EXIST,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
    FieldSelector,
    LabelSelector,
    SelectorError,
    label_selector_from_dict,
    node_selector_term_matches,
    parse_field_selector,
    parse_label_selector,
)

NAME_REGEX_HINT = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_REGEX_HINT = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


# -- query-string label selectors -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, labels, expected",
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app==web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {"app": "db"}, True),
        ("app!=web", {"app": "web"}, False),
        ("app!=web", {}, True),  # != also selects objects without the key
        ("app in (web,db)", {"app": "db"}, True),
        ("app in (web,db)", {"app": "cache"}, False),
        ("app in (web,db)", {}, False),
        ("app notin (web,db)", {"app": "cache"}, True),
        ("app notin (web,db)", {"app": "web"}, False),
        ("app notin (web,db)", {}, True),  # notin also selects objects without the key
        ("app", {"app": ""}, True),
        ("app", {"other": "x"}, False),
        ("!app", {"other": "x"}, True),
        ("!app", {"app": "web"}, False),
        ("rank>5", {"rank": "6"}, True),
        ("rank>5", {"rank": "5"}, False),
        ("rank>5", {"rank": "abc"}, False),
        ("rank>5", {}, False),
        ("rank<5", {"rank": "-3"}, True),
        ("rank<5", {"rank": "7"}, False),
        ("app=", {"app": ""}, True),
        ("app=", {"app": "x"}, False),
        ("app in ()", {"app": ""}, True),
        ("app in (,web)", {"app": ""}, True),
    ],
)
def test_every_operator(text: str, labels: dict, expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


def test_comma_is_and_with_whitespace_and_prefixed_keys() -> None:
    sel = parse_label_selector("  koordinator.sh/qosClass in ( LS , BE ) ,  app = web,!node-role.kubernetes.io/master ")
    assert [r.key for r in sel.requirements] == ["app", "koordinator.sh/qosClass", "node-role.kubernetes.io/master"]
    assert sel.matches({"koordinator.sh/qosClass": "BE", "app": "web"})
    assert not sel.matches({"koordinator.sh/qosClass": "LSR", "app": "web"})
    assert not sel.matches({"koordinator.sh/qosClass": "BE", "app": "web", "node-role.kubernetes.io/master": ""})


def test_keywords_are_plain_identifiers_in_value_position() -> None:
    sel = parse_label_selector("in in (in,notin),notin=in")
    assert sel.matches({"in": "notin", "notin": "in"})
    assert not sel.matches({"in": "x", "notin": "in"})


def test_empty_selector_matches_everything_including_no_labels() -> None:
    for text in ("", "   "):
        sel = parse_label_selector(text)
        assert sel.empty
        assert sel.matches(None)
        assert sel.matches({"a": "b"})
        assert str(sel) == ""


def test_none_labels_mean_no_labels() -> None:
    assert not parse_label_selector("a=b").matches(None)
    assert parse_label_selector("!a").matches(None)
    assert parse_label_selector("a notin (x)").matches(None)


def test_string_form_is_canonical() -> None:
    sel = parse_label_selector("z notin (b,a,a), !y, x in (c), w==1, v!=2, u, t>3, s<4")
    assert str(sel) == "s<4,t>3,u,v!=2,w==1,x in (c),!y,z notin (a,b)"
    assert parse_label_selector(str(sel)) == sel


@pytest.mark.parametrize(
    "text, message",
    [
        ("a$=b", f'unable to parse requirement: <nil>: Invalid value: "a$": {NAME_REGEX_HINT}'),
        ("a=b$", f'unable to parse requirement: values[0][a]: Invalid value: "b$": {VALUE_REGEX_HINT}'),
        ("/a=b", 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'),
        ("a=b,", "found '', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("a>b", 'unable to parse requirement: values[0]: Invalid value: "b": for \'Gt\', \'Lt\' operators, '
                "the value must be an integer"),
    ],
)
def test_parse_errors_use_kubernetes_wording(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert str(err.value) == message


def test_selector_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        parse_label_selector("a in (")


def test_too_many_slashes_and_long_names_rejected() -> None:
    with pytest.raises(SelectorError, match="with an optional DNS subdomain prefix"):
        parse_label_selector("a/b/c")
    with pytest.raises(SelectorError, match="must be no more than 63 characters"):
        parse_label_selector("k" * 64)
    with pytest.raises(SelectorError, match="prefix part a lowercase RFC 1123 subdomain"):
        parse_label_selector("Example.com/a")
    assert parse_label_selector("k" * 63).matches({"k" * 63: "x"})


# -- metav1.LabelSelector objects ---------------------------------------------------------------


def test_nil_selector_matches_nothing_by_default() -> None:
    sel = label_selector_from_dict(None)
    assert sel.match_nothing and not sel.empty
    assert not sel.matches({})
    assert not sel.matches({"a": "b"})
    assert label_selector_from_dict(None, nil_matches_nothing=False).matches({"a": "b"})


def test_empty_selector_object_matches_everything() -> None:
    for sel in ({}, {"matchLabels": {}}, {"matchLabels": None, "matchExpressions": []}):
        selector = label_selector_from_dict(sel)
        assert selector.empty
        assert selector.matches({}) and selector.matches(None)


def test_match_labels_and_expressions_are_anded() -> None:
    sel = label_selector_from_dict({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "koordinator.sh/qosClass", "operator": "In", "values": ["LS", "LSR"]},
            {"key": "tier", "operator": "NotIn", "values": ["batch"]},
            {"key": "zone", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    })
    good = {"app": "web", "koordinator.sh/qosClass": "LS", "zone": "a"}
    assert sel.matches(good)
    assert not sel.matches({**good, "app": "db"})
    assert not sel.matches({**good, "koordinator.sh/qosClass": "BE"})
    assert not sel.matches({**good, "tier": "batch"})
    assert sel.matches({**good, "tier": "web"})
    assert not sel.matches({k: v for k, v in good.items() if k != "zone"})
    assert not sel.matches({**good, "legacy": ""})
    assert [r.operator for r in sel.requirements] == ["=", IN, DOES_NOT_EXIST, NOT_IN, EXISTS]


def test_match_labels_only_fast_path() -> None:
    sel = label_selector_from_dict({"matchLabels": {"a": "1", "b": "2"}})
    assert sel.matches({"a": "1", "b": "2", "c": "3"})
    assert not sel.matches({"a": "1"})
    assert not sel.matches(None)
    assert str(sel) == "a=1,b=2"


@pytest.mark.parametrize(
    "sel, message",
    [
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
         "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn"}]},
         "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set can't be empty"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
         'values: Invalid value: []string{"x"}: values set must be empty for exists and does not exist'),
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
         '"Gt" is not a valid label selector operator'),
        ({"matchLabels": {"a b": "c"}}, f'key: Invalid value: "a b": {NAME_REGEX_HINT}'),
        ({"matchLabels": {"a": "c d"}}, f'values[0][a]: Invalid value: "c d": {VALUE_REGEX_HINT}'),
    ],
)
def test_invalid_selector_objects(sel: dict, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        label_selector_from_dict(sel)
    assert str(err.value) == message


def test_selector_constants_and_equality() -> None:
    assert LabelSelector.everything().empty
    assert LabelSelector.nothing().match_nothing
    assert parse_label_selector("a=b") == label_selector_from_dict({"matchLabels": {"a": "b"}})
    assert hash(parse_label_selector("a in (x,y)")) == hash(parse_label_selector("a in (y,x)"))


# -- field selectors ----------------------------------------------------------------------------


def test_field_selector_operators_and_missing_fields() -> None:
    sel = parse_field_selector("spec.nodeName=node-1,status.phase!=Failed,metadata.namespace==default")
    assert sel.requirements == (
        ("metadata.namespace", "=", "default"),
        ("spec.nodeName", "=", "node-1"),
        ("status.phase", NOT_EQUALS, "Failed"),
    )
    assert sel.fields() == {"spec.nodeName", "status.phase", "metadata.namespace"}
    fields = {"spec.nodeName": "node-1", "status.phase": "Running", "metadata.namespace": "default"}
    assert sel.matches(fields)
    assert not sel.matches({**fields, "status.phase": "Failed"})
    assert not sel.matches({**fields, "spec.nodeName": "node-2"})
    # A field the object does not have compares as "".
    assert parse_field_selector("spec.nodeName=").matches({})
    assert parse_field_selector("spec.nodeName!=").matches({"spec.nodeName": "n"})
    assert not parse_field_selector("spec.nodeName!=").matches({})


def test_field_selector_escapes() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d,metadata.namespace!=x\,y")
    assert sel.requirements == (("metadata.name", "=", "a,b=c\\d"), ("metadata.namespace", "!=", "x,y"))
    assert sel.matches({"metadata.name": "a,b=c\\d", "metadata.namespace": "z"})
    assert str(sel) == r"metadata.name=a\,b\=c\\d,metadata.namespace!=x\,y"


def test_field_selector_empty_and_trailing_terms() -> None:
    assert parse_field_selector("").empty
    assert parse_field_selector("").matches({"anything": "x"})
    assert parse_field_selector("a=b,").requirements == (("a", "=", "b"),)
    # No trimming, as in Kubernetes: the field name keeps the space.
    assert parse_field_selector("a=b, c=d").fields() == {"a", " c"}
    assert isinstance(parse_field_selector("a=b"), FieldSelector)


@pytest.mark.parametrize(
    "text, message",
    [
        ("status.phase", "invalid selector: 'status.phase'; can't understand 'status.phase'"),
        ("a=b=c", "invalid field selector: unescaped character in value: 61"),
        (r"a=b\x", r"invalid field selector: invalid escape sequence: \x"),
        ("a=b\\", "invalid field selector: invalid escape sequence: \\"),
        ("metadata.name!==x", "invalid field selector: unescaped character in value: 61"),
    ],
)
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_field_selector(text)
    assert str(err.value) == message


# -- node selector terms ------------------------------------------------------------------------

NODE_LABELS = {
    "kubernetes.io/hostname": "node-1",
    "topology.kubernetes.io/zone": "zone-a",
    "node.koordinator.sh/gpu-count": "4",
    "node-role.kubernetes.io/worker": "",
}


def _expr(key: str, op: str, *values: str) -> dict:
    expr = {"key": key, "operator": op}
    if values:
        expr["values"] = list(values)
    return expr


@pytest.mark.parametrize(
    "expressions, expected",
    [
        ([_expr("topology.kubernetes.io/zone", "In", "zone-a", "zone-b")], True),
        ([_expr("topology.kubernetes.io/zone", "In", "zone-b")], False),
        ([_expr("topology.kubernetes.io/zone", "NotIn", "zone-b")], True),
        ([_expr("missing", "NotIn", "x")], True),
        ([_expr("node-role.kubernetes.io/worker", "Exists")], True),
        ([_expr("node-role.kubernetes.io/master", "DoesNotExist")], True),
        ([_expr("node.koordinator.sh/gpu-count", "Gt", "3")], True),
        ([_expr("node.koordinator.sh/gpu-count", "Gt", "4")], False),
        ([_expr("node.koordinator.sh/gpu-count", "Lt", "5")], True),
        ([_expr("node.koordinator.sh/gpu-count", "Lt", "4")], False),
        ([_expr("kubernetes.io/hostname", "Gt", "1")], False),  # non-integer label value
        ([_expr("missing", "Lt", "10")], False),
        ([_expr("topology.kubernetes.io/zone", "In", "zone-a"), _expr("missing", "Exists")], False),
    ],
)
def test_node_selector_term_expressions(expressions: list, expected: bool) -> None:
    assert node_selector_term_matches({"matchExpressions": expressions}, NODE_LABELS) is expected


def test_node_selector_term_match_fields() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    assert node_selector_term_matches(term, NODE_LABELS, {"metadata.name": "node-1"})
    assert not node_selector_term_matches(term, NODE_LABELS, {"metadata.name": "node-2"})
    not_in = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}
    assert node_selector_term_matches(not_in, NODE_LABELS, {"metadata.name": "node-2"})
    both = {**term, "matchExpressions": [_expr("topology.kubernetes.io/zone", "In", "zone-b")]}
    assert not node_selector_term_matches(both, NODE_LABELS, {"metadata.name": "node-1"})
    # Without node fields the matchFields part is not evaluated (nodeaffinity behaviour).
    assert node_selector_term_matches(term, NODE_LABELS, None)


@pytest.mark.parametrize(
    "term",
    [
        None,
        {},
        {"matchExpressions": [], "matchFields": []},
        {"matchExpressions": [_expr("a", "Gt", "1", "2")]},
        {"matchExpressions": [_expr("a", "Gt", "x")]},
        {"matchExpressions": [_expr("a", "In")]},
        {"matchExpressions": [_expr("a", "Exists", "x")]},
        {"matchExpressions": [_expr("a", "Like", "x")]},
        {"matchExpressions": [_expr("bad key", "Exists")]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]},
    ],
)
def test_empty_or_invalid_node_selector_terms_match_nothing(term) -> None:
    assert not node_selector_term_matches(term, {"a": "5"}, {"metadata.name": "a"})


def test_requirement_operators_exposed() -> None:
    sel = parse_label_selector("a>1,b<2")
    assert [r.operator for r in sel.requirements] == [GREATER_THAN, LESS_THAN]
    assert sel.requirements[0].values == ("1",)
