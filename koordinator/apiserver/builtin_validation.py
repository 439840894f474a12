"""Field validation of built-in kinds, with kube-apiserver's field paths and messages.

``validate(group, kind, obj, old)`` returns every cause (not just the first), in the order
the real server reports them, ready for :func:`koordinator.apiserver.errors.invalid`. Kinds
without a validator of their own (custom resources included) get ObjectMeta validation.

Decode-stage failures are separate, because the real server answers them with a 400
before any validation runs: :func:`check_metadata_types` (non-string label/annotation
values, malformed quantities in built-in kinds) returns the detail text for
``errors.cannot_handle``. ``validate`` assumes that check passed: quantities it cannot parse
are skipped rather than reported twice.

Messages follow kube-apiserver v1.36 (``k8s.io/apimachinery`` field errors, the
``content`` package's format messages, ``pkg/apis/*/validation``). Values that Go prints
with ``%#v`` (maps, structs) are rendered the same way where that is deterministic;
pointer addresses, which Go prints as ``0xc...``, are rendered as ``0xc000000000``.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterable

from koordinator.apis import quantity as qty
from koordinator.apiserver.errors import (
    cause,
    duplicate,
    forbidden_field,
    format_value,
    not_supported,
    required,
    too_long,
)

Obj = dict[str, Any]
Cause = dict[str, str]
Causes = list[Cause]
NameFn = Callable[[str, bool], list[str]]

# ---------------------------------------------------------------------------------------
# Format checks (k8s.io/apimachinery/pkg/api/validate/content and util/validation)
# ---------------------------------------------------------------------------------------

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)
_PORT_NAME_CHARSET_RE = re.compile("[-a-z0-9]+")
_PORT_NAME_LETTER_RE = re.compile("[a-z]")
_PERCENT_RE = re.compile("[0-9]+%")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery's ``RegexError``: the message, examples, and the regex used."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    """``MaxLenError``: the v1.36 ``content`` package counts bytes."""
    return f"must be no more than {length} bytes"


def inclusive_range_error(lo: int, hi: int) -> str:
    """``InclusiveRangeError``."""
    return f"must be between {lo} and {hi}, inclusive"


_DNS1123_LABEL_MSG = regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character", _DNS1123_LABEL_FMT, "my-name", "123-abc")
_DNS1123_SUBDOMAIN_MSG = regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character", _DNS1123_SUBDOMAIN_FMT, "example.com")
_DNS1035_LABEL_MSG = regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character", _DNS1035_LABEL_FMT, "my-name", "abc-123")
_LABEL_KEY_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                  "alphanumeric character")
_LABEL_NAME_MSG = "name part " + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
_LABEL_KEY_SLASHES_MSG = (
    "a valid label key " + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
    + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
_LABEL_VALUE_MSG = regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character", _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
_CONFIG_KEY_MSG = regex_error(
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'", _CONFIG_KEY_FMT,
    "key.name", "KEY_NAME", "key-name")
_PERCENT_MSG = regex_error(
    "a valid percent string must be a numeric string followed by an ending '%'", "[0-9]+%", "1%", "93%")
_NEGATIVE = "must be greater than or equal to 0"
_IMMUTABLE = "field is immutable"


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: problems with ``value`` as an RFC 1123 label (empty when valid)."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append("must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else _DNS1123_LABEL_MSG)
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``."""
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_DNS1123_SUBDOMAIN_MSG)
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_DNS1035_LABEL_MSG)
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName`` (label keys, annotation keys, finalizers, condition types...)."""
    return list(_qualified_name_errors(value))


@functools.lru_cache(maxsize=16384)
def _qualified_name_errors(value: str) -> tuple[str, ...]:
    # The same keys (labels, resource names) recur on every write: worth caching.
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return (_LABEL_KEY_SLASHES_MSG,)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(_LABEL_NAME_MSG)
    return tuple(errs)


def is_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    if len(value) <= 63 and _LABEL_VALUE_RE.fullmatch(value):
        return []
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_LABEL_VALUE_MSG)
    return errs


def is_config_map_key(value: str) -> list[str]:
    """``IsConfigMapKey``: ConfigMap/Secret data keys."""
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _CONFIG_KEY_RE.fullmatch(value):
        errs.append(_CONFIG_KEY_MSG)
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def is_valid_port_num(port: int) -> list[str]:
    """``IsValidPortNum``: 1-65535."""
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    """``IsValidPortName`` (IANA service names)."""
    errs = []
    if len(port) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARSET_RE.fullmatch(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER_RE.search(port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _mask_trailing_dash(name: str) -> str:
    # Upstream drops two characters, not one; reproduced because it changes which
    # generateName prefixes pass.
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """``NameIsDNSSubdomain``: most kinds' names; ``prefix`` for generateName."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    """``NameIsDNSLabel``: Namespace names."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool) -> list[str]:
    """``NameIsDNS1035Label``: Service names."""
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """``ValidatePathSegmentName``: RBAC names, which may hold ':' and uppercase."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


# ---------------------------------------------------------------------------------------
# Cause helpers and Go value rendering
# ---------------------------------------------------------------------------------------


def _fmt(value: Any) -> str:
    # A nil pointer prints as the quoted string "null" in field errors.
    return '"null"' if value is None else format_value(value)


def _invalid(field: str, value: Any, detail: str) -> Cause:
    return cause("FieldValueInvalid", field, f"Invalid value: {_fmt(value)}: {detail}")


def _invalid_raw(field: str, rendered: str, detail: str) -> Cause:
    """Invalid with a value already rendered the Go way (maps, structs, Stringers)."""
    return cause("FieldValueInvalid", field, f"Invalid value: {rendered}: {detail}")


def _not_found(field: str, value: Any) -> Cause:
    return cause("FieldValueNotFound", field, f"Not found: {_fmt(value)}")


def _go_quote(s: str) -> str:
    """Go's ``strconv.Quote`` for the printable-ASCII-and-unicode strings manifests hold."""
    out = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_string_map(m: Any) -> str:
    """``%#v`` of a ``map[string]string`` (keys sorted, as fmt prints maps)."""
    if m is None:
        return "map[string]string(nil)"
    items = ", ".join(f"{_go_quote(str(k))}:{_go_quote(_str(v))}" for k, v in sorted(_d(m).items()))
    return "map[string]string{" + items + "}"


def _label_selector_string(sel: Any) -> str:
    """gogo-protobuf ``(*LabelSelector).String()``, how field errors print selectors."""
    if sel is None:
        return "nil"
    sel = _d(sel)
    labels = "".join(f"{k}: {_str(v)}," for k, v in sorted(_d(sel.get("matchLabels")).items()))
    exprs = "".join(
        "LabelSelectorRequirement{Key:%s,Operator:%s,Values:[%s],}," % (
            _str(e.get("key")), _str(e.get("operator")), " ".join(_str(v) for v in _l(e.get("values"))))
        for e in (_d(x) for x in _l(sel.get("matchExpressions"))))
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def _int_or_string(value: Any) -> str:
    """``(*IntOrString).String()``: field errors print IntOrString unquoted."""
    return value if isinstance(value, str) else format_value(value)


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _nonnegative(value: Any, field: str) -> Causes:
    n = _int(value)
    return [_invalid(field, n, _NEGATIVE)] if n is not None and n < 0 else []


# ---------------------------------------------------------------------------------------
# ObjectMeta
# ---------------------------------------------------------------------------------------

_TOTAL_ANNOTATION_SIZE = 256 * 1024
_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def validate_labels(labels: Any, path: str) -> Causes:
    """``ValidateLabels``: qualified-name keys, label values; errors sit on ``path`` itself."""
    causes: Causes = []
    for key, val in _d(labels).items():
        causes.extend(_invalid(path, key, m) for m in is_qualified_name(str(key)))
        if isinstance(val, str):
            causes.extend(_invalid(path, val, m) for m in is_label_value(val))
    return causes


def validate_annotations(annotations: Any, path: str) -> Causes:
    """``ValidateAnnotations``: case-insensitive qualified keys and the 256 KiB total."""
    causes: Causes = []
    total = 0
    for key, val in _d(annotations).items():
        key = str(key)
        causes.extend(_invalid(path, key, m) for m in is_qualified_name(key.lower()))
        total += len(key) + (len(val) if isinstance(val, str) else 0)
    if total * 4 > _TOTAL_ANNOTATION_SIZE:
        # Only pay for exact byte counting when the character count could exceed the limit.
        size = sum(len(str(k).encode()) + len(_str(v).encode()) for k, v in _d(annotations).items())
        if size > _TOTAL_ANNOTATION_SIZE:
            causes.append(too_long(path, _TOTAL_ANNOTATION_SIZE))
    return causes


def _validate_owner_references(refs: Any, path: str) -> Causes:
    causes: Causes = []
    controller = ""
    for ref in (_d(r) for r in _l(refs)):
        api_version = _str(ref.get("apiVersion"))
        version = api_version.rsplit("/", 1)[-1] if api_version else ""
        if not version:
            causes.append(_invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for fld in ("kind", "name", "uid"):
            if not _str(ref.get(fld)):
                causes.append(_invalid(f"{path}.{fld}", _str(ref.get(fld)), "must not be empty"))
        if ref.get("controller") is True:
            current = f"{_str(ref.get('kind'))}/{_str(ref.get('name'))}"
            if controller:
                causes.append(_invalid_raw(path, "[]v1.OwnerReference{...}", (
                    f'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{controller} and {current}")))
            else:
                controller = current
    return causes


def _validate_finalizers(finalizers: Any, path: str, kube: bool) -> Causes:
    causes: Causes = []
    items = [f for f in _l(finalizers) if isinstance(f, str)]
    for f in items:
        causes.extend(_invalid(path, f, m) for m in is_qualified_name(f))
    if "orphan" in items and "foregroundDeletion" in items:
        causes.append(_invalid_raw(path, "[]string{" + ", ".join(_go_quote(f) for f in items) + "}",
                                   "finalizer orphan and foregroundDeletion cannot be both set"))
    if kube:
        for i, f in enumerate(items):
            if "/" not in f and f not in _STANDARD_FINALIZERS:
                causes.append(_invalid(f"{path}[{i}]", f,
                                       "name is neither a standard finalizer name nor is it fully qualified"))
    return causes


def validate_object_meta(obj: Obj, name_fn: NameFn = name_is_dns_subdomain, kube: bool = True,
                         path: str = "metadata") -> Causes:
    """``ValidateObjectMeta``: name/generateName, labels, annotations, owners, finalizers.

    ``kube`` adds core's extra finalizer rule (unqualified names must be standard), which
    custom resources do not get. Namespace presence is the caller's business.
    """
    md = _d(obj.get("metadata"))
    causes: Causes = []
    generate = _str(md.get("generateName"))
    if generate:
        causes.extend(_invalid(f"{path}.generateName", generate, m) for m in name_fn(generate, True))
    name = _str(md.get("name"))
    if not name:
        causes.append(required(f"{path}.name", "name or generateName is required"))
    else:
        causes.extend(_invalid(f"{path}.name", name, m) for m in name_fn(name, False))
    causes.extend(_nonnegative(md.get("generation"), f"{path}.generation"))
    causes.extend(validate_labels(md.get("labels"), f"{path}.labels"))
    causes.extend(validate_annotations(md.get("annotations"), f"{path}.annotations"))
    causes.extend(_validate_owner_references(md.get("ownerReferences"), f"{path}.ownerReferences"))
    causes.extend(_validate_finalizers(md.get("finalizers"), f"{path}.finalizers", kube))
    return causes


# ---------------------------------------------------------------------------------------
# Decode-stage checks (400s)
# ---------------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


_POD_TEMPLATE_PATHS: dict[str, tuple[tuple[str, ...], str]] = {
    # kind -> (keys down to the PodSpec, JSON path prefix Go prints for struct fields)
    "Pod": (("spec",), "spec"),
    "PodTemplate": (("template", "spec"), "template.spec"),
    "Deployment": (("spec", "template", "spec"), "spec.template.spec"),
    "DaemonSet": (("spec", "template", "spec"), "spec.template.spec"),
    "ReplicaSet": (("spec", "template", "spec"), "spec.template.spec"),
    "StatefulSet": (("spec", "template", "spec"), "spec.template.spec"),
    "ReplicationController": (("spec", "template", "spec"), "spec.template.spec"),
    "Job": (("spec", "template", "spec"), "spec.template.spec"),
    "CronJob": (("spec", "jobTemplate", "spec", "template", "spec"), "spec.jobTemplate.spec.template.spec"),
}


def _check_resource_list(value: Any, go_path: str, owner: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return (f"json: cannot unmarshal {_json_type(value)} into Go struct field {owner}.{go_path} "
                f"of type v1.ResourceList")
    for raw in value.values():
        try:
            qty.parse(raw)
        except qty.QuantityError as err:
            return str(err)
    return None


def _check_pod_spec_quantities(spec: Any, go_path: str) -> str | None:
    spec = _d(spec)
    for list_name in ("containers", "initContainers", "ephemeralContainers"):
        for ctr in (_d(c) for c in _l(spec.get(list_name))):
            res = _d(ctr.get("resources"))
            for part in ("limits", "requests"):
                detail = _check_resource_list(res.get(part), f"{go_path}.{list_name}.resources.{part}",
                                              "ResourceRequirements")
                if detail:
                    return detail
            for env in (_d(e) for e in _l(ctr.get("env"))):
                divisor = _d(_d(env.get("valueFrom")).get("resourceFieldRef")).get("divisor")
                if divisor is not None:
                    try:
                        qty.parse(divisor)
                    except qty.QuantityError as err:
                        return str(err)
    for part in ("limits", "requests"):
        detail = _check_resource_list(_d(spec.get("resources")).get(part), f"{go_path}.resources.{part}",
                                      "ResourceRequirements")
        if detail:
            return detail
    detail = _check_resource_list(spec.get("overhead"), f"{go_path}.overhead", "PodSpec")
    if detail:
        return detail
    for vol in (_d(v) for v in _l(spec.get("volumes"))):
        size = _d(vol.get("emptyDir")).get("sizeLimit")
        if size is not None:
            try:
                qty.parse(size)
            except qty.QuantityError as err:
                return str(err)
    return None


def check_quantities(kind: str, obj: Obj) -> str | None:
    """The decode error for the first malformed quantity in a built-in object, or None.

    Covers pod specs (Pods and every workload template), Node capacity/allocatable and
    ResourceQuota hard limits: e.g. ``quantities must match the regular expression ...``.
    """
    if kind in _POD_TEMPLATE_PATHS:
        keys, go_path = _POD_TEMPLATE_PATHS[kind]
        node: Any = obj
        for k in keys:
            node = _d(node).get(k)
        return _check_pod_spec_quantities(node, go_path)
    if kind == "Node":
        status = _d(obj.get("status"))
        for part in ("capacity", "allocatable"):
            detail = _check_resource_list(status.get(part), f"status.{part}", "NodeStatus")
            if detail:
                return detail
    if kind == "ResourceQuota":
        return _check_resource_list(_d(obj.get("spec")).get("hard"), "spec.hard", "ResourceQuotaSpec")
    return None


def check_metadata_types(kind: str, version: str, obj: Obj, builtin: bool = True) -> str | None:
    """The decode error the real server gives for ill-typed metadata, or None.

    E.g. ``json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of
    type string``. Built-in kinds name the field ``ObjectMeta.metadata.labels``; custom
    resources (``builtin=False``), decoded through unstructured conversion, say
    ``ObjectMeta.labels``. For built-in kinds a malformed quantity is reported first, as Go's
    decoder aborts on it but only records type mismatches (see :func:`check_quantities`).
    ``version`` is accepted for symmetry with ``errors.cannot_handle``.
    """
    # Time and quantity errors abort Go's decoder (metadata comes first in a manifest);
    # plain type mismatches are only recorded, so they lose to both.
    detail = _check_meta_times(obj.get("metadata"))
    if detail:
        return detail
    if builtin:
        detail = check_quantities(kind, obj)
        if detail:
            return detail
    detail = _check_meta_types(obj.get("metadata"), "ObjectMeta.metadata." if builtin else "ObjectMeta.")
    if detail or not builtin or kind not in _POD_TEMPLATE_PATHS or kind == "Pod":
        return detail
    # The pod template's metadata decodes into ObjectMeta too, under its full JSON path.
    keys, go_path = _POD_TEMPLATE_PATHS[kind]
    node: Any = obj
    for k in keys[:-1]:
        node = _d(node).get(k)
    return _check_meta_types(_d(node).get("metadata"), f"ObjectMeta.{go_path[:-len('spec')]}metadata.")


_RFC3339 = "2006-01-02T15:04:05Z07:00"


def _go_time_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _two_digits(value: str, fixed: bool) -> tuple[int, str] | None:
    """Go's ``getnum``: one or two leading digits (exactly two when ``fixed``)."""
    if not value[:1].isdigit():
        return None
    if not value[1:2].isdigit():
        return None if fixed else (int(value[0]), value[1:])
    return int(value[:2]), value[2:]


def rfc3339_error(text: str) -> str | None:
    """Go's ``time.Parse(time.RFC3339, text)`` error for a bad ``metav1.Time``, or None.

    Reproduces the element-by-element messages (``cannot parse "X" as "2006"``, ``month
    out of range``...) that the server returns for placeholders such as ``YYYY-MM-DD...``.
    """
    def fail(value_elem: str, layout_elem: str) -> str:
        return (f"parsing time {_go_time_quote(text)} as {_go_time_quote(_RFC3339)}: cannot parse "
                f"{_go_time_quote(value_elem)} as {_go_time_quote(layout_elem)}")

    def out_of_range(what: str) -> str:
        return f"parsing time {_go_time_quote(text)}: {what} out of range"

    value = text
    if len(value) < 4 or not value[:4].isdigit():
        return fail(value, "2006")
    year, value = int(value[:4]), value[4:]
    parts: dict[str, int] = {}
    for sep, elem, fixed, limit in (("-", "01", True, "month"), ("-", "02", True, "day"), ("T", "15", False, "hour"),
                                    (":", "04", True, "minute"), (":", "05", True, "second")):
        if not value.startswith(sep):
            return fail(value, sep)
        value = value[1:]
        got = _two_digits(value, fixed)
        if got is None:
            return fail(value, elem)
        num, rest = got
        if (limit == "month" and not 1 <= num <= 12) or (limit == "hour" and num >= 24) or \
                (limit in ("minute", "second") and num >= 60):
            return out_of_range(limit)
        parts[limit], value = num, rest
        if limit == "second" and len(value) >= 2 and value[0] in ".," and value[1].isdigit():
            n = 2
            while n < len(value) and value[n].isdigit():
                n += 1
            value = value[n:]
    if value.startswith("Z"):
        value = value[1:]
    elif len(value) < 6 or value[3] != ":" or value[0] not in "+-" or not (value[1:3] + value[4:6]).isdigit():
        return fail(value, "Z07:00")
    else:
        value = value[6:]
    if value:
        return f"parsing time {_go_time_quote(text)}: extra text: {_go_time_quote(value)}"
    month_days = [31, 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28,
                  31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not 1 <= parts["day"] <= month_days[parts["month"] - 1]:
        return out_of_range("day")
    return None


def _check_meta_times(md: Any) -> str | None:
    if not isinstance(md, dict):
        return None
    for fld in ("creationTimestamp", "deletionTimestamp"):
        val = md.get(fld)
        if val is None:
            continue
        if not isinstance(val, str):
            return f"json: cannot unmarshal {_json_type(val)} into Go value of type string"
        detail = rfc3339_error(val)
        if detail:
            return detail
    return None


_META_FIELD_TYPES = {
    # JSON field -> (Go type of the field, Go type of its elements or None)
    "name": ("string", None), "generateName": ("string", None), "namespace": ("string", None),
    "labels": ("map[string]string", "string"), "annotations": ("map[string]string", "string"),
    "finalizers": ("[]string", "string"),
}


def _check_meta_types(md: Any, prefix: str) -> str | None:
    """First type mismatch in ObjectMeta, in document order as Go's decoder meets them."""
    if not isinstance(md, dict):
        return None
    for fld, val in md.items():
        if fld not in _META_FIELD_TYPES or val is None:
            continue
        go_type, elem_type = _META_FIELD_TYPES[fld]
        if elem_type is None:
            if not isinstance(val, str):
                return f"json: cannot unmarshal {_json_type(val)} into Go struct field {prefix}{fld} of type {go_type}"
            continue
        container = dict if go_type.startswith("map") else list
        if not isinstance(val, container):
            return f"json: cannot unmarshal {_json_type(val)} into Go struct field {prefix}{fld} of type {go_type}"
        for item in (val.values() if container is dict else val):
            if item is not None and not isinstance(item, str):
                return (f"json: cannot unmarshal {_json_type(item)} into Go struct field {prefix}{fld} "
                        f"of type {elem_type}")
    return None


# ---------------------------------------------------------------------------------------
# Resources (pkg/apis/core/helper semantics)
# ---------------------------------------------------------------------------------------

_STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps", "services.nodeports",
    "services.loadbalancers", "requests.storage", "storage",
})
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_INTEGER_RESOURCES = frozenset({
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})
POD_LEVEL_RESOURCES = ["cpu", "hugepages-", "memory"]


def is_hugepage_resource(name: str) -> bool:
    """``hugepages-<size>``."""
    return name.startswith("hugepages-")


def is_native_resource(name: str) -> bool:
    """Unprefixed, or in the ``kubernetes.io/`` namespace (Koordinator's batch-cpu etc.)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """A fully-qualified, non-native resource such as ``nvidia.com/gpu``."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def is_overcommit_allowed(name: str) -> bool:
    """Native non-hugepage resources may have requests below limits."""
    return is_native_resource(name) and not is_hugepage_resource(name)


def _is_standard_resource(name: str) -> bool:
    return name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))


def _validate_resource_name(name: str, path: str) -> Causes:
    msgs = is_qualified_name(name)
    if msgs:
        return [_invalid(path, name, m) for m in msgs]
    if "/" not in name and not _is_standard_resource(name):
        return [_invalid(path, name, "must be a standard resource type or fully qualified")]
    return []


def _validate_container_resource_name(name: str, path: str) -> Causes:
    causes = _validate_resource_name(name, path)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not is_hugepage_resource(name):
            causes.append(_invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource(name):
        causes.append(_invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


def _validate_pod_resource_name(name: str, path: str) -> Causes:
    causes = _validate_resource_name(name, path)
    if causes:
        return causes
    if name not in ("cpu", "memory") and not is_hugepage_resource(name):
        return [not_supported(path, name, POD_LEVEL_RESOURCES)]
    return []


def _quantity(raw: Any) -> qty.ParsedQuantity | None:
    try:
        return qty.parse(raw)
    except qty.QuantityError:
        return None


def _validate_quantity_value(name: str, q: qty.ParsedQuantity, path: str) -> Causes:
    """``ValidateResourceQuantityValue``: non-negative, whole for integer resources."""
    causes: Causes = []
    if q.value < 0:
        causes.append(_invalid(path, q.string, _NEGATIVE))
    if name in _INTEGER_RESOURCES or is_extended_resource(name):
        if qty.milli_value(q.value) % 1000:
            causes.append(_invalid_raw(path, q.string, "must be an integer"))
    return causes


def _validate_resource_requirements(res: Any, path: str, name_fn: Callable[[str, str], Causes]) -> Causes:
    """``validateResourceRequirements`` for container (or pod-level) resources."""
    res = _d(res)
    limits, requests = _d(res.get("limits")), _d(res.get("requests"))
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    causes: Causes = []
    lim_cpu_mem = req_cpu_mem = lim_huge = req_huge = False
    for name, raw in limits.items():
        fp = f"{lim_path}[{name}]"
        causes.extend(name_fn(name, fp))
        q = _quantity(raw)
        if q is not None:
            causes.extend(_validate_quantity_value(name, q, fp))
        lim_huge = lim_huge or is_hugepage_resource(name)
        lim_cpu_mem = lim_cpu_mem or name in ("cpu", "memory")
    for name, raw in requests.items():
        fp = f"{req_path}[{name}]"
        causes.extend(name_fn(name, fp))
        q = _quantity(raw)
        if q is not None:
            causes.extend(_validate_quantity_value(name, q, fp))
        if name in limits:
            lim = _quantity(limits[name])
            if q is not None and lim is not None:
                if q.value != lim.value and not is_overcommit_allowed(name):
                    causes.append(_invalid(req_path, q.string, f"must be equal to {name} limit of {lim.string}"))
                elif q.value > lim.value:
                    causes.append(_invalid(req_path, q.string,
                                           f"must be less than or equal to {name} limit of {lim.string}"))
        elif not is_overcommit_allowed(name):
            causes.append(required(lim_path, "Limit must be set for non overcommitable resources"))
        req_huge = req_huge or is_hugepage_resource(name)
        req_cpu_mem = req_cpu_mem or name in ("cpu", "memory")
    if not lim_cpu_mem and not req_cpu_mem and (lim_huge or req_huge):
        causes.append(forbidden_field(path, "HugePages require cpu or memory"))
    return causes


# ---------------------------------------------------------------------------------------
# Pod spec
# ---------------------------------------------------------------------------------------

_VOLUME_SOURCES = (
    # (JSON key, path Go uses in "may not specify more than 1 volume type"), in Go's order.
    ("emptyDir", "emptyDir"), ("hostPath", "hostPath"), ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"), ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"), ("nfs", "nfs"), ("iscsi", "iscsi"), ("glusterfs", "glusterfs"), ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"), ("rbd", "rbd"), ("cinder", "cinder"),
    ("cephfs", "cephFS"), ("quobyte", "quobyte"), ("downwardAPI", "downwarAPI"), ("fc", "fc"),
    ("flexVolume", "flexVolume"), ("configMap", "configMap"), ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"), ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"), ("azureDisk", "azureDisk"), ("storageos", "storageos"),
    ("projected", "projected"), ("scaleIO", "scaleIO"), ("csi", "csi"), ("ephemeral", "ephemeral"),
    ("image", "image"),
)
_HOST_PATH_TYPES = ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"]


def _validate_volume_source(vol: Obj, path: str) -> Causes:
    causes: Causes = []
    count = 0
    for key, forbid_path in _VOLUME_SOURCES:
        src = vol.get(key)
        if src is None:
            continue
        if count > 0 and key != "emptyDir":
            causes.append(forbidden_field(f"{path}.{forbid_path}", "may not specify more than 1 volume type"))
            continue
        count += 1
        src = _d(src)
        if key == "hostPath":
            if not _str(src.get("path")):
                causes.append(required(f"{path}.hostPath.path", ""))
            else:
                if ".." in _str(src.get("path")).split("/"):
                    causes.append(_invalid(f"{path}.hostPath.path", src["path"], "must not contain '..'"))
                htype = src.get("type")
                if htype is not None and htype not in _HOST_PATH_TYPES:
                    causes.append(not_supported(f"{path}.hostPath.type", htype, _HOST_PATH_TYPES))
        elif key == "secret" and not _str(src.get("secretName")):
            causes.append(required(f"{path}.secret.secretName", ""))
        elif key == "configMap" and not _str(src.get("name")):
            causes.append(required(f"{path}.configMap.name", ""))
        elif key == "persistentVolumeClaim" and not _str(src.get("claimName")):
            causes.append(required(f"{path}.persistentVolumeClaim.claimName", ""))
        elif key == "emptyDir" and src.get("sizeLimit") is not None:
            q = _quantity(src.get("sizeLimit"))
            if q is not None and q.value < 0:
                causes.append(forbidden_field(f"{path}.emptyDir.sizeLimit",
                                              "SizeLimit field must be a valid resource quantity"))
    if count == 0:
        causes.append(required(path, "must specify a volume type"))
    return causes


def _validate_volumes(volumes: Any, path: str) -> tuple[set[str], Causes]:
    causes: Causes = []
    names: set[str] = set()
    for i, vol in enumerate(_d(v) for v in _l(volumes)):
        idx = f"{path}[{i}]"
        name = _str(vol.get("name"))
        errs = _validate_volume_source(vol, idx)
        if not name:
            errs.append(required(f"{idx}.name", ""))
        else:
            errs.extend(_invalid(f"{idx}.name", name, m) for m in is_dns1123_label(name))
        if name in names:
            errs.append(duplicate(f"{idx}.name", name))
        if errs:
            causes.extend(errs)
        else:
            names.add(name)
    return names, causes


def _validate_port_num_or_name(port: Any, path: str) -> Causes:
    if isinstance(port, str):
        return [_invalid(path, port, m) for m in is_valid_port_name(port)]
    n = _int(port)
    if n is None:
        return []
    return [_invalid(path, n, m) for m in is_valid_port_num(n)]


_PORT_PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _validate_container_ports(ports: Any, path: str) -> Causes:
    causes: Causes = []
    names: set[str] = set()
    for i, port in enumerate(_d(p) for p in _l(ports)):
        idx = f"{path}[{i}]"
        name = _str(port.get("name"))
        if name:
            msgs = is_valid_port_name(name)
            if msgs:
                causes.extend(_invalid(f"{idx}.name", name, m) for m in msgs)
            elif name in names:
                causes.append(duplicate(f"{idx}.name", name))
            else:
                names.add(name)
        cport = _int(port.get("containerPort")) or 0
        if cport == 0:
            causes.append(required(f"{idx}.containerPort", ""))
        else:
            causes.extend(_invalid(f"{idx}.containerPort", cport, m) for m in is_valid_port_num(cport))
        hport = _int(port.get("hostPort")) or 0
        if hport:
            causes.extend(_invalid(f"{idx}.hostPort", hport, m) for m in is_valid_port_num(hport))
        protocol = _str(port.get("protocol"))
        if not protocol:
            causes.append(required(f"{idx}.protocol", ""))
        elif protocol not in _PORT_PROTOCOLS:
            causes.append(not_supported(f"{idx}.protocol", protocol, _PORT_PROTOCOLS))
    return causes


def _validate_env(env: Any, path: str) -> Causes:
    causes: Causes = []
    for i, var in enumerate(_d(e) for e in _l(env)):
        name = _str(var.get("name"))
        npath = f"{path}[{i}].name"
        if not name:
            causes.append(required(npath, ""))
        elif any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in name):
            # v1.36 validates env names relaxed: any printable ASCII except '='.
            causes.append(_invalid(npath, name, "a valid environment variable name must consist only of "
                                                "printable ASCII characters other than '='"))
    return causes


def _validate_volume_mounts(mounts: Any, volumes: set[str], path: str) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for i, mnt in enumerate(_d(m) for m in _l(mounts)):
        idx = f"{path}[{i}]"
        name = _str(mnt.get("name"))
        mount_path = _str(mnt.get("mountPath"))
        if not name:
            causes.append(required(f"{idx}.name", ""))
        if name not in volumes:
            causes.append(_not_found(f"{idx}.name", name))
        if not mount_path:
            causes.append(required(f"{idx}.mountPath", ""))
        if mount_path in seen:
            causes.append(_invalid(f"{idx}.mountPath", mount_path, "must be unique"))
        seen.add(mount_path)
    return causes


_PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
_TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
_HTTP_SCHEMES = ["HTTP", "HTTPS"]


def _validate_handler(handler: Obj, path: str, probe: bool) -> Causes:
    causes: Causes = []
    kinds = ("exec", "httpGet", "tcpSocket", "grpc") if probe else ("exec", "httpGet", "tcpSocket", "sleep")
    count = 0
    for kind in kinds:
        body = handler.get(kind)
        if body is None:
            continue
        if count:
            causes.append(forbidden_field(f"{path}.{kind}", "may not specify more than 1 handler type"))
            continue
        count += 1
        body = _d(body)
        if kind == "exec" and not _l(body.get("command")):
            causes.append(required(f"{path}.exec.command", ""))
        elif kind == "httpGet":
            if not _str(body.get("path")):
                causes.append(required(f"{path}.httpGet.path", ""))
            causes.extend(_validate_port_num_or_name(body.get("port"), f"{path}.httpGet.port"))
            scheme = _str(body.get("scheme"))
            if scheme not in _HTTP_SCHEMES:
                causes.append(not_supported(f"{path}.httpGet.scheme", scheme, _HTTP_SCHEMES))
        elif kind == "tcpSocket":
            causes.extend(_validate_port_num_or_name(body.get("port"), f"{path}.tcpSocket.port"))
        elif kind == "grpc":
            causes.extend(_validate_port_num_or_name(_int(body.get("port")) or 0, f"{path}.grpc.port"))
    if count == 0:
        causes.append(required(path, "must specify a handler type"))
    return causes


def _validate_probe(probe: Any, path: str, kind: str) -> Causes:
    if probe is None:
        return []
    probe = _d(probe)
    causes = _validate_handler(probe, path, probe=True)
    for fld in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        causes.extend(_nonnegative(probe.get(fld), f"{path}.{fld}"))
    grace = _int(probe.get("terminationGracePeriodSeconds"))
    if grace is not None and grace <= 0:
        causes.append(_invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))
    success = _int(probe.get("successThreshold"))
    if kind in ("livenessProbe", "startupProbe") and success is not None and success != 1:
        causes.append(_invalid(f"{path}.successThreshold", success, "must be 1"))
    if kind == "readinessProbe" and probe.get("terminationGracePeriodSeconds") is not None:
        causes.append(_invalid(f"{path}.terminationGracePeriodSeconds", grace, "must not be set for readinessProbes"))
    return causes


def _validate_lifecycle_and_probes(ctr: Obj, path: str) -> Causes:
    causes: Causes = []
    lifecycle = ctr.get("lifecycle")
    if lifecycle is not None:
        for hook in ("postStart", "preStop"):
            if _d(lifecycle).get(hook) is not None:
                causes.extend(_validate_handler(_d(_d(lifecycle)[hook]), f"{path}.lifecycle.{hook}", probe=False))
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        causes.extend(_validate_probe(ctr.get(kind), f"{path}.{kind}", kind))
    return causes


def _validate_container_common(ctr: Obj, volumes: set[str], path: str) -> Causes:
    causes: Causes = []
    name = _str(ctr.get("name"))
    if not name:
        causes.append(required(f"{path}.name", ""))
    else:
        causes.extend(_invalid(f"{path}.name", name, m) for m in is_dns1123_label(name))
    if not _str(ctr.get("image")):
        causes.append(required(f"{path}.image", ""))
    policy = _str(ctr.get("terminationMessagePolicy"))
    if not policy:
        causes.append(required(f"{path}.terminationMessagePolicy", ""))
    elif policy not in _TERMINATION_MESSAGE_POLICIES:
        causes.append(not_supported(f"{path}.terminationMessagePolicy", policy, _TERMINATION_MESSAGE_POLICIES))
    causes.extend(_validate_container_ports(ctr.get("ports"), f"{path}.ports"))
    causes.extend(_validate_env(ctr.get("env"), f"{path}.env"))
    causes.extend(_validate_volume_mounts(ctr.get("volumeMounts"), volumes, f"{path}.volumeMounts"))
    pull = _str(ctr.get("imagePullPolicy"))
    if not pull:
        causes.append(required(f"{path}.imagePullPolicy", ""))
    elif pull not in _PULL_POLICIES:
        causes.append(not_supported(f"{path}.imagePullPolicy", pull, _PULL_POLICIES))
    causes.extend(_validate_resource_requirements(ctr.get("resources"), f"{path}.resources",
                                                  _validate_container_resource_name))
    return causes


def _host_port_conflicts(containers: list[Obj], path: str) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for ci, ctr in enumerate(containers):
        for pi, port in enumerate(_d(p) for p in _l(ctr.get("ports"))):
            host_port = _int(port.get("hostPort")) or 0
            if not host_port:
                continue
            key = f"{_str(port.get('protocol'))}/{_str(port.get('hostIP'))}/{host_port}"
            if key in seen:
                causes.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return causes


def _validate_containers(containers: Any, volumes: set[str], path: str) -> Causes:
    items = [_d(c) for c in _l(containers)]
    if not items:
        return [required(path, "")]
    causes: Causes = []
    names: set[str] = set()
    for i, ctr in enumerate(items):
        idx = f"{path}[{i}]"
        causes.extend(_validate_container_common(ctr, volumes, idx))
        name = _str(ctr.get("name"))
        if name in names:
            causes.append(duplicate(f"{idx}.name", name))
        else:
            names.add(name)
        causes.extend(_validate_lifecycle_and_probes(ctr, idx))
        if ctr.get("restartPolicy") is not None:
            causes.append(forbidden_field(f"{idx}.restartPolicy", "may not be set for non-init containers"))
    causes.extend(_host_port_conflicts(items, path))
    return causes


def _validate_init_containers(init: Any, regular: Any, volumes: set[str], path: str) -> Causes:
    causes: Causes = []
    names = {_str(_d(c).get("name")) for c in _l(regular)}
    for i, ctr in enumerate(_d(c) for c in _l(init)):
        idx = f"{path}[{i}]"
        causes.extend(_validate_container_common(ctr, volumes, idx))
        restart = ctr.get("restartPolicy")
        if restart is not None and restart != "Always":
            causes.append(not_supported(f"{idx}.restartPolicy", restart, ["Always"]))
        name = _str(ctr.get("name"))
        if name in names:
            causes.append(duplicate(f"{idx}.name", name))
        elif name:
            names.add(name)
        causes.extend(_host_port_conflicts([ctr], path))
        if restart == "Always":
            causes.extend(_validate_lifecycle_and_probes(ctr, idx))
        else:
            for fld in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if ctr.get(fld) is not None:
                    causes.append(forbidden_field(f"{idx}.{fld}",
                                                  "may not be set for init containers without restartPolicy=Always"))
    return causes


_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
_PREEMPTION_POLICIES = ["PreemptLowerPriority", "Never"]
_TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_TOLERATION_OPERATORS = ["Equal", "Exists"]
_UNSATISFIABLE_ACTIONS = ["DoNotSchedule", "ScheduleAnyway"]


def _enum(value: Any, path: str, allowed: list[str]) -> Causes:
    """Required when empty, Unsupported when not one of ``allowed``."""
    text = _str(value)
    if not text:
        return [required(path, "")]
    return [] if text in allowed else [not_supported(path, text, allowed)]


def _validate_node_selector_requirement(req: Obj, path: str, check_values: bool) -> Causes:
    causes: Causes = []
    op = _str(req.get("operator"))
    values = [v for v in _l(req.get("values"))]
    if op in ("In", "NotIn"):
        if not values:
            causes.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            causes.append(forbidden_field(f"{path}.values",
                                          "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        causes.append(_invalid(f"{path}.operator", op, "not a valid selector operator"))
    key = _str(req.get("key"))
    causes.extend(_invalid(f"{path}.key", key, m) for m in is_qualified_name(key))
    if check_values:
        for i, val in enumerate(values):
            causes.extend(_invalid(f"{path}.values[{i}]", _str(val), m) for m in is_label_value(_str(val)))
    return causes


def _validate_node_selector_term(term: Obj, path: str, check_values: bool) -> Causes:
    causes: Causes = []
    for j, req in enumerate(_d(r) for r in _l(term.get("matchExpressions"))):
        causes.extend(_validate_node_selector_requirement(req, f"{path}.matchExpressions[{j}]", check_values))
    for j, req in enumerate(_d(r) for r in _l(term.get("matchFields"))):
        fpath = f"{path}.matchFields[{j}]"
        op = _str(req.get("operator"))
        values = _l(req.get("values"))
        if op in ("In", "NotIn"):
            if len(values) != 1:
                causes.append(required(f"{fpath}.values", "must be only one value when `operator` is 'In' or "
                                                          "'NotIn' for node field selector"))
        else:
            causes.append(_invalid(f"{fpath}.operator", op, "not a valid selector operator"))
        key = _str(req.get("key"))
        if key != "metadata.name":
            causes.append(_invalid(f"{fpath}.key", key, "not a valid field selector key"))
        else:
            for i, val in enumerate(values):
                causes.extend(_invalid(f"{fpath}.values[{i}]", _str(val), m)
                              for m in name_is_dns_subdomain(_str(val), False))
    return causes


def validate_label_selector(sel: Any, path: str, check_values: bool = True) -> Causes:
    """``ValidateLabelSelector`` for a ``metav1.LabelSelector`` (None is valid)."""
    if sel is None:
        return []
    sel = _d(sel)
    causes = validate_labels(sel.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(_d(e) for e in _l(sel.get("matchExpressions"))):
        epath = f"{path}.matchExpressions[{i}]"
        op = _str(expr.get("operator"))
        values = _l(expr.get("values"))
        if op in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{epath}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                causes.append(forbidden_field(f"{epath}.values",
                                              "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(_invalid(f"{epath}.operator", op, "not a valid selector operator"))
        key = _str(expr.get("key"))
        causes.extend(_invalid(f"{epath}.key", key, m) for m in is_qualified_name(key))
        if check_values:
            for j, val in enumerate(values):
                causes.extend(_invalid(f"{epath}.values[{j}]", _str(val), m) for m in is_label_value(_str(val)))
    return causes


def selector_matches(sel: Any, labels: Any) -> bool:
    """Whether a LabelSelector selects ``labels`` (None selects nothing, {} everything)."""
    if sel is None:
        return False
    sel = _d(sel)
    labels = _d(labels)
    for k, v in _d(sel.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for expr in (_d(e) for e in _l(sel.get("matchExpressions"))):
        key, op, values = _str(expr.get("key")), _str(expr.get("operator")), _l(expr.get("values"))
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _validate_pod_affinity_term(term: Obj, path: str) -> Causes:
    causes = validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    causes.extend(validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector"))
    for ns in _l(term.get("namespaces")):
        causes.extend(_invalid(f"{path}.namespace", _str(ns), m) for m in name_is_dns_label(_str(ns), False))
    key = _str(term.get("topologyKey"))
    if not key:
        causes.append(required(f"{path}.topologyKey", "can not be empty"))
    causes.extend(_invalid(f"{path}.topologyKey", key, m) for m in is_qualified_name(key))
    return causes


def _validate_pod_affinity(aff: Obj, path: str) -> Causes:
    causes: Causes = []
    for i, term in enumerate(_d(t) for t in _l(aff.get("requiredDuringSchedulingIgnoredDuringExecution"))):
        causes.extend(_validate_pod_affinity_term(term, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"))
    for i, wterm in enumerate(_d(t) for t in _l(aff.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        wpath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = _int(wterm.get("weight")) or 0
        if weight <= 0 or weight > 100:
            causes.append(_invalid(f"{wpath}.weight", weight, "must be in the range 1-100"))
        causes.extend(_validate_pod_affinity_term(_d(wterm.get("podAffinityTerm")), f"{wpath}.podAffinityTerm"))
    return causes


def _validate_affinity(affinity: Any, path: str) -> Causes:
    affinity = _d(affinity)
    causes: Causes = []
    node = affinity.get("nodeAffinity")
    if node is not None:
        node = _d(node)
        npath = f"{path}.nodeAffinity"
        req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req is not None:
            rpath = f"{npath}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            terms = _l(_d(req).get("nodeSelectorTerms"))
            if not terms:
                causes.append(required(rpath, "must have at least one node selector term"))
            for i, term in enumerate(_d(t) for t in terms):
                causes.extend(_validate_node_selector_term(term, f"{rpath}[{i}]", True))
        for i, pref in enumerate(_d(p) for p in _l(node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            ppath = f"{npath}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            weight = _int(pref.get("weight")) or 0
            if weight <= 0 or weight > 100:
                causes.append(_invalid(f"{ppath}.weight", weight, "must be in the range 1-100"))
            # Preferred terms tolerate invalid label values: one node may still match.
            causes.extend(_validate_node_selector_term(_d(pref.get("preference")), f"{ppath}.preference", False))
    for kind in ("podAffinity", "podAntiAffinity"):
        if affinity.get(kind) is not None:
            causes.extend(_validate_pod_affinity(_d(affinity[kind]), f"{path}.{kind}"))
    return causes


def validate_tolerations(tolerations: Any, path: str) -> Causes:
    """``ValidateTolerations``."""
    causes: Causes = []
    for i, tol in enumerate(_d(t) for t in _l(tolerations)):
        idx = f"{path}[{i}]"
        key, op, val, effect = (_str(tol.get(f)) for f in ("key", "operator", "value", "effect"))
        if key:
            causes.extend(_invalid(f"{idx}.key", key, m) for m in is_qualified_name(key))
        if not key and op != "Exists":
            causes.append(_invalid(f"{idx}.operator", op,
                                   "operator must be Exists when `key` is empty, which means "
                                   "\"match all values and all keys\""))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(_invalid(f"{idx}.effect", effect,
                                   "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            msgs = is_label_value(val)
            if msgs:
                causes.append(_invalid(f"{idx}.operator", val, ";".join(msgs)))
        elif op == "Exists":
            if val:
                causes.append(_invalid(f"{idx}.operator", val, "value must be empty when `operator` is 'Exists'"))
        else:
            causes.append(not_supported(f"{idx}.operator", op, _TOLERATION_OPERATORS))
        if effect and effect not in _TAINT_EFFECTS:
            causes.append(not_supported(f"{idx}.effect", effect, _TAINT_EFFECTS))
    return causes


def _validate_topology_spread(constraints: Any, path: str) -> Causes:
    causes: Causes = []
    for i, c in enumerate(_d(x) for x in _l(constraints)):
        idx = f"{path}[{i}]"
        skew = _int(c.get("maxSkew")) or 0
        if skew <= 0:
            causes.append(_invalid(f"{idx}.maxSkew", skew, "must be greater than zero"))
        if not _str(c.get("topologyKey")):
            causes.append(required(f"{idx}.topologyKey", "can not be empty"))
        action = _str(c.get("whenUnsatisfiable"))
        if action not in _UNSATISFIABLE_ACTIONS:
            causes.append(not_supported(f"{idx}.whenUnsatisfiable", action, _UNSATISFIABLE_ACTIONS))
        causes.extend(validate_label_selector(c.get("labelSelector"), f"{idx}.labelSelector"))
    return causes


def _validate_scheduling_gates(gates: Any, path: str) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for i, gate in enumerate(_d(g) for g in _l(gates)):
        name = _str(gate.get("name"))
        causes.extend(_invalid(f"{path}[{i}]", name, m) for m in is_qualified_name(name))
        if name in seen:
            causes.append(duplicate(f"{path}[{i}]", name))
        seen.add(name)
    return causes


def _validate_pod_resources(spec: Obj, path: str) -> Causes:
    res = spec.get("resources")
    if res is None:
        return []
    res = _d(res)
    causes: Causes = []
    if res.get("claims") is not None:
        causes.append(forbidden_field(f"{path}.claims", "claims cannot be set for Resources at pod-level"))
    causes.extend(_validate_resource_requirements(res, path, _validate_pod_resource_name))
    # Consistency with the containers, for resources the pod level names explicitly.
    pod_requests, pod_limits = _d(res.get("requests")), _d(res.get("limits"))
    totals: dict[str, Any] = {}
    for ctr in (_d(c) for c in _l(spec.get("containers"))):
        for name, raw in _d(_d(ctr.get("resources")).get("requests")).items():
            q = _quantity(raw)
            if q is not None:
                totals[name] = totals.get(name, 0) + q.value
    for name, total in totals.items():
        pod_q = _quantity(pod_requests[name]) if name in pod_requests else None
        if pod_q is not None and total > pod_q.value:
            causes.append(_invalid(f"{path}.requests[{name}]", pod_q.string,
                                   f"must be greater than or equal to aggregate container requests of "
                                   f"{qty.format_quantity(total)}"))
    for i, ctr in enumerate(_d(c) for c in _l(spec.get("containers"))):
        for name, raw in _d(_d(ctr.get("resources")).get("limits")).items():
            if name not in pod_limits:
                continue
            cq, pq = _quantity(raw), _quantity(pod_limits[name])
            if cq is not None and pq is not None and cq.value > pq.value:
                causes.append(_invalid(f"{path}.containers[{i}][{name}].limits", cq.string,
                                       f"must be less than or equal to pod limits of {pq.string}"))
    return causes


def validate_pod_spec(spec: Any, path: str, is_pod: bool) -> Causes:
    """``ValidatePodSpec`` (defaults already applied). ``is_pod`` for a Pod, not a template."""
    spec = _d(spec)
    causes: Causes = []
    if spec.get("terminationGracePeriodSeconds") is None:
        causes.append(required(f"{path}.terminationGracePeriodSeconds", ""))
    volumes, vol_causes = _validate_volumes(spec.get("volumes"), f"{path}.volumes")
    causes.extend(vol_causes)
    causes.extend(_validate_containers(spec.get("containers"), volumes, f"{path}.containers"))
    causes.extend(_validate_init_containers(spec.get("initContainers"), spec.get("containers"), volumes,
                                            f"{path}.initContainers"))
    causes.extend(_validate_pod_resources(spec, f"{path}.resources"))
    if spec.get("hostNetwork") is True:
        for i, ctr in enumerate(_d(c) for c in _l(spec.get("containers"))):
            for j, port in enumerate(_d(p) for p in _l(ctr.get("ports"))):
                hp, cp = _int(port.get("hostPort")) or 0, _int(port.get("containerPort")) or 0
                if (is_pod or hp != 0) and hp != cp:
                    causes.append(_invalid(f"{path}.containers[{i}].ports[{j}].hostPort", hp,
                                           "must match `containerPort` when `hostNetwork` is true"))
    causes.extend(_enum(spec.get("restartPolicy"), f"{path}.restartPolicy", _RESTART_POLICIES))
    causes.extend(_enum(spec.get("dnsPolicy"), f"{path}.dnsPolicy", _DNS_POLICIES))
    causes.extend(validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector"))
    if spec.get("affinity") is not None:
        causes.extend(_validate_affinity(spec.get("affinity"), f"{path}.affinity"))
    if spec.get("dnsPolicy") == "None" and not _l(_d(spec.get("dnsConfig")).get("nameservers")):
        if spec.get("dnsConfig") is None:
            causes.append(required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
        else:
            causes.append(required(f"{path}.dnsConfig.nameservers",
                                   "must provide at least one DNS nameserver when `dnsPolicy` is None"))
    for i, gate in enumerate(_d(g) for g in _l(spec.get("readinessGates"))):
        ctype = _str(gate.get("conditionType"))
        causes.extend(_invalid(f"{path}.readinessGates[{i}].conditionType", ctype, m) for m in is_qualified_name(ctype))
    causes.extend(_validate_scheduling_gates(spec.get("schedulingGates"), f"{path}.schedulingGates"))
    causes.extend(_validate_topology_spread(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints"))
    for fld, fn in (("serviceAccountName", name_is_dns_subdomain), ("nodeName", name_is_dns_subdomain)):
        val = _str(spec.get(fld))
        if val:
            causes.extend(_invalid(f"{path}.{fld}", val, m) for m in fn(val, False))
    deadline = _int(spec.get("activeDeadlineSeconds"))
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        causes.append(_invalid(f"{path}.activeDeadlineSeconds", deadline, inclusive_range_error(1, 2**31 - 1)))
    for fld in ("hostname", "subdomain"):
        val = _str(spec.get(fld))
        if val:
            causes.extend(_invalid(f"{path}.{fld}", val, m) for m in is_dns1123_label(val))
    causes.extend(validate_tolerations(spec.get("tolerations"), f"{path}.tolerations"))
    for fld in ("priorityClassName", "runtimeClassName"):
        val = _str(spec.get(fld))
        if val:
            causes.extend(_invalid(f"{path}.{fld}", val, m) for m in name_is_dns_subdomain(val, False))
    if spec.get("preemptionPolicy") is not None:
        causes.extend(_enum(spec.get("preemptionPolicy"), f"{path}.preemptionPolicy", _PREEMPTION_POLICIES))
    if spec.get("overhead") is not None:
        causes.extend(_validate_resource_requirements({"limits": spec.get("overhead")}, f"{path}.overhead",
                                                      _validate_container_resource_name))
    return causes


def _validate_pod_template(tmpl: Any, path: str) -> Causes:
    """``ValidatePodTemplateSpec``: template labels/annotations sit on ``<path>.labels``."""
    tmpl = _d(tmpl)
    md = _d(tmpl.get("metadata"))
    causes = validate_labels(md.get("labels"), f"{path}.labels")
    causes.extend(validate_annotations(md.get("annotations"), f"{path}.annotations"))
    spec = _d(tmpl.get("spec"))
    causes.extend(validate_pod_spec(spec, f"{path}.spec", is_pod=False))
    if _l(spec.get("ephemeralContainers")):
        causes.append(forbidden_field(f"{path}.spec.ephemeralContainers",
                                      "ephemeral containers not allowed in pod template"))
    return causes


# ---------------------------------------------------------------------------------------
# Pod create / update
# ---------------------------------------------------------------------------------------

_UPDATABLE_POD_FIELDS = ",".join([
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
])


def _validate_pod(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(validate_pod_spec(spec, "spec", is_pod=True))
    for list_name in ("containers", "initContainers"):
        for i, ctr in enumerate(_d(c) for c in _l(spec.get(list_name))):
            image = _str(ctr.get("image"))
            if image != image.strip():
                causes.append(_invalid(f"spec.{list_name}[{i}].image", image,
                                       "must not have leading or trailing whitespace"))
    if old is None:
        if _l(spec.get("ephemeralContainers")):
            causes.append(forbidden_field("spec.ephemeralContainers", "cannot be set on create"))
        if _str(spec.get("nodeName")) and _l(spec.get("schedulingGates")):
            causes.append(forbidden_field("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    else:
        causes.extend(_validate_pod_update(spec, _d(_d(old).get("spec"))))
    return causes


def _validate_container_updates(new: Any, old: Any, path: str) -> tuple[Causes, bool]:
    new_items, old_items = _l(new), _l(old)
    if len(new_items) != len(old_items):
        return [forbidden_field(path, "pod updates may not add or remove containers")], True
    causes: Causes = []
    for i, ctr in enumerate(_d(c) for c in new_items):
        if not _str(ctr.get("image")):
            causes.append(required(f"{path}[{i}].image", ""))
    return causes, False


def _semantic(value: Any, key: str = "") -> Any:
    """A normal form for Semantic.DeepEqual: empty means absent, quantities compare by value."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if key in ("limits", "requests", "overhead") and not isinstance(v, (dict, list)):
                q = _quantity(v)
                norm: Any = q.value if q is not None else v
            else:
                norm = _semantic(v, k)
            if norm is not None and norm != {} and norm != []:
                out[k] = norm
        return out
    if isinstance(value, list):
        return [_semantic(v, key) for v in value]
    return value


def _toleration_key(tol: Any) -> Any:
    t = dict(_d(tol))
    t.pop("tolerationSeconds", None)
    return _semantic(t)


def _go_field(name: str) -> str:
    return name[:1].upper() + name[1:]


def _spec_diff(old: Obj, new: Obj) -> str:
    """A cmp.Diff-shaped summary of the changed top-level PodSpec fields (approximate)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key in old:
                lines.append(f"- \t{_go_field(key)}: {old[key]!r},")
            if key in new:
                lines.append(f"+ \t{_go_field(key)}: {new[key]!r},")
    lines.append("  }")
    return "\n".join(lines)


def _validate_pod_update(spec: Obj, old_spec: Obj) -> Causes:
    """``ValidatePodUpdate``'s mutability rules (status is not looked at)."""
    causes: Causes = []
    errs, stop = _validate_container_updates(spec.get("containers"), old_spec.get("containers"), "spec.containers")
    causes.extend(errs)
    if stop:
        return causes
    errs, stop = _validate_container_updates(spec.get("initContainers"), old_spec.get("initContainers"),
                                             "spec.initContainers")
    causes.extend(errs)
    if stop:
        return causes
    new_deadline, old_deadline = _int(spec.get("activeDeadlineSeconds")), _int(old_spec.get("activeDeadlineSeconds"))
    if new_deadline is not None:
        if new_deadline < 0 or new_deadline > 2**31 - 1:
            causes.append(_invalid("spec.activeDeadlineSeconds", new_deadline, inclusive_range_error(0, 2**31 - 1)))
            return causes
        if old_deadline is not None and old_deadline < new_deadline:
            causes.append(_invalid("spec.activeDeadlineSeconds", new_deadline,
                                   "must be less than or equal to previous value"))
            return causes
    elif old_deadline is not None:
        causes.append(_invalid("spec.activeDeadlineSeconds", None,
                               "must not update from a positive integer to nil value"))
    new_tols = [_toleration_key(t) for t in _l(spec.get("tolerations"))]
    for old_tol in _l(old_spec.get("tolerations")):
        if _toleration_key(old_tol) not in new_tols:
            causes.append(forbidden_field("spec.tolerations",
                                          "existing toleration can not be modified except its tolerationSeconds"))
            break
    else:
        # Only reached when every old toleration survived; Go re-validates the new list then.
        causes.extend(validate_tolerations(spec.get("tolerations"), "spec.tolerations"))
    new_gates = _l(spec.get("schedulingGates"))
    if new_gates:
        old_names = {_str(_d(g).get("name")) for g in _l(old_spec.get("schedulingGates"))}
        added: dict[str, int] = {}
        for i, gate in enumerate(_d(g) for g in new_gates):
            added[_str(gate.get("name"))] = i
        for name, i in added.items():
            if name not in old_names:
                causes.append(forbidden_field(f"spec.schedulingGates[{i}].name",
                                              f"only deletion is allowed, but found new scheduling gate '{name}'"))

    new_norm, old_norm = _semantic(spec), _semantic(old_spec)
    if new_norm == old_norm:
        return causes
    munged = dict(new_norm)
    for list_name in ("containers", "initContainers"):
        if list_name in munged:
            old_list = old_norm.get(list_name, [])
            merged = []
            for i, ctr in enumerate(munged[list_name]):
                ctr = dict(ctr) if isinstance(ctr, dict) else ctr
                if isinstance(ctr, dict) and i < len(old_list) and isinstance(old_list[i], dict):
                    if "image" in old_list[i]:
                        ctr["image"] = old_list[i]["image"]
                    else:
                        ctr.pop("image", None)
                merged.append(ctr)
            munged[list_name] = merged
    for fld in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if fld in old_norm:
            munged[fld] = old_norm[fld]
        else:
            munged.pop(fld, None)
    old_grace = _int(old_spec.get("terminationGracePeriodSeconds"))
    if old_grace is not None and old_grace < 0 and _int(munged.get("terminationGracePeriodSeconds")) == 1:
        munged["terminationGracePeriodSeconds"] = old_norm.get("terminationGracePeriodSeconds")
    if old_norm.get("schedulingGates"):
        # Gated pods may gain nodeSelector entries and node affinity while still gated.
        for fld in ("nodeSelector",):
            if fld in old_norm or fld in munged:
                old_sel, new_sel = old_norm.get(fld, {}), munged.get(fld, {})
                if all(new_sel.get(k) == v for k, v in old_sel.items()):
                    munged[fld] = old_sel
                    if not old_sel:
                        munged.pop(fld, None)
    if munged != old_norm:
        causes.append(forbidden_field("spec", f"pod updates may not change fields other than {_UPDATABLE_POD_FIELDS}\n"
                                              f"{_spec_diff(old_norm, munged)}"))
    return causes


# ---------------------------------------------------------------------------------------
# Workloads (apps/v1, batch/v1)
# ---------------------------------------------------------------------------------------


def _selector_and_template(spec: Obj, path: str, kind: str) -> Causes:
    """Selector checks shared by Deployment and ReplicaSet plus the template match."""
    causes: Causes = []
    sel = spec.get("selector")
    sel_errs: Causes = []
    if sel is None:
        causes.append(required(f"{path}.selector", ""))
    else:
        sel_errs = validate_label_selector(sel, f"{path}.selector")
        causes.extend(sel_errs)
        if not _d(_d(sel).get("matchLabels")) and not _l(_d(sel).get("matchExpressions")):
            causes.append(_invalid_raw(f"{path}.selector", _label_selector_string(sel),
                                       "empty selector is invalid for deployment"))
    if sel_errs:
        causes.append(_invalid_raw(f"{path}.selector", _label_selector_string(sel), "invalid label selector"))
    else:
        causes.extend(_template_for_replicas(spec, sel, f"{path}.template", kind))
    return causes


def _template_labels(tmpl: Any) -> Any:
    md = _d(tmpl).get("metadata")
    return md.get("labels") if isinstance(md, dict) else None


def _selector_mismatch(sel: Any, tmpl: Any, path: str) -> Causes:
    labels = _template_labels(tmpl)
    if selector_matches(sel, labels):
        return []
    return [_invalid_raw(f"{path}.metadata.labels", go_string_map(labels),
                         "`selector` does not match template `labels`")]


def _restart_always(tmpl: Any, path: str) -> Causes:
    restart = _str(_d(_d(tmpl).get("spec")).get("restartPolicy"))
    return [] if restart == "Always" else [not_supported(f"{path}.spec.restartPolicy", restart, ["Always"])]


def _template_for_replicas(spec: Obj, sel: Any, path: str, kind: str) -> Causes:
    """``ValidatePodTemplateSpecForReplicaSet``."""
    tmpl = spec.get("template")
    causes: Causes = []
    # An empty (non-nil) selector selects everything, so there is nothing to mismatch.
    if sel is None or _d(sel).get("matchLabels") or _l(_d(sel).get("matchExpressions")):
        causes.extend(_selector_mismatch(sel, tmpl, path))
    causes.extend(_validate_pod_template(tmpl, path))
    causes.extend(_restart_always(tmpl, path))
    if _d(_d(tmpl).get("spec")).get("activeDeadlineSeconds") is not None:
        causes.append(forbidden_field(f"{path}.spec.activeDeadlineSeconds",
                                      "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return causes


def _positive_int_or_percent(value: Any, path: str) -> Causes:
    """``ValidatePositiveIntOrPercent``: a non-negative int or an ``N%`` string."""
    if isinstance(value, str):
        return [] if _PERCENT_RE.fullmatch(value) else [_invalid_raw(path, value, _PERCENT_MSG)]
    return _nonnegative(value, path)


def _not_more_than_100_percent(value: Any, path: str) -> Causes:
    """``IsNotMoreThan100Percent`` (IntOrString prints unquoted, through its String method)."""
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value) and int(value[:-1]) > 100:
        return [_invalid_raw(path, value, "must not be greater than 100%")]
    return []


def _validate_int_or_percent(value: Any, path: str) -> Causes:
    """Both checks on one field, as PodDisruptionBudget applies them."""
    if value is None:
        return []
    return _positive_int_or_percent(value, path) + _not_more_than_100_percent(value, path)


def _int_or_percent_value(value: Any) -> int:
    if isinstance(value, str):
        return int(value[:-1]) if _PERCENT_RE.fullmatch(value) else 0
    return _int(value) or 0


def _validate_deployment_strategy(strategy: Any, path: str) -> Causes:
    strategy = _d(strategy)
    stype = _str(strategy.get("type"))
    rolling = strategy.get("rollingUpdate")
    if stype == "Recreate":
        if rolling is not None:
            return [forbidden_field(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if stype == "RollingUpdate":
        if rolling is None:
            return [required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
        rolling = _d(rolling)
        rpath = f"{path}.rollingUpdate"
        unavailable, surge = rolling.get("maxUnavailable", 0), rolling.get("maxSurge", 0)
        causes = _positive_int_or_percent(unavailable, f"{rpath}.maxUnavailable")
        causes.extend(_positive_int_or_percent(surge, f"{rpath}.maxSurge"))
        if not _int_or_percent_value(unavailable) and not _int_or_percent_value(surge):
            causes.append(_invalid_raw(f"{rpath}.maxUnavailable", _int_or_string(unavailable),
                                       "may not be 0 when `maxSurge` is 0"))
        causes.extend(_not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable"))
        return causes
    rendered = (f"apps.DeploymentStrategy{{Type:{_go_quote(stype)}, RollingUpdate:(*apps.RollingUpdateDeployment)"
                f"({'0xc000000000' if rolling is not None else 'nil'})}}")
    return [cause("FieldValueNotSupported", path,
                  f'Unsupported value: {rendered}: supported values: "Recreate", "RollingUpdate"')]


def _validate_deployment(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(_nonnegative(spec.get("replicas"), "spec.replicas"))
    causes.extend(_selector_and_template(spec, "spec", "Deployment"))
    causes.extend(_validate_deployment_strategy(spec.get("strategy"), "spec.strategy"))
    causes.extend(_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    causes.extend(_nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    deadline = _int(spec.get("progressDeadlineSeconds"))
    if deadline is not None:
        causes.extend(_nonnegative(deadline, "spec.progressDeadlineSeconds"))
        if deadline <= (_int(spec.get("minReadySeconds")) or 0):
            causes.append(_invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def _selector_immutable(spec: Obj, old: Obj | None) -> Causes:
    if old is None:
        return []
    old_sel = _d(_d(old).get("spec")).get("selector")
    if _semantic(spec.get("selector")) != _semantic(old_sel):
        return [_invalid_raw("spec.selector", _label_selector_string(spec.get("selector")), _IMMUTABLE)]
    return []


def _validate_replicaset(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(_nonnegative(spec.get("replicas"), "spec.replicas"))
    causes.extend(_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    causes.extend(_selector_and_template(spec, "spec", "ReplicaSet"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def _validate_rolling_update_daemonset(rolling: Obj, path: str) -> Causes:
    unavailable, surge = rolling.get("maxUnavailable", 0), rolling.get("maxSurge", 0)
    causes = _positive_int_or_percent(unavailable, f"{path}.maxUnavailable")
    causes.extend(_positive_int_or_percent(surge, f"{path}.maxSurge"))
    causes.extend(_not_more_than_100_percent(unavailable, f"{path}.maxUnavailable"))
    causes.extend(_not_more_than_100_percent(surge, f"{path}.maxSurge"))
    has_unavailable, has_surge = _int_or_percent_value(unavailable) != 0, _int_or_percent_value(surge) != 0
    if has_unavailable and has_surge:
        causes.append(_invalid_raw(f"{path}.maxSurge", _int_or_string(surge),
                                   "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        causes.append(required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return causes


def _validate_daemonset(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    sel = spec.get("selector")
    sel_errs = validate_label_selector(sel, "spec.selector")
    causes.extend(sel_errs)
    tmpl = spec.get("template")
    if not sel_errs:
        causes.extend(_selector_mismatch(sel, tmpl, "spec.template"))
    if sel is not None and not _d(_d(sel).get("matchLabels")) and not _l(_d(sel).get("matchExpressions")):
        causes.append(_invalid_raw("spec.selector", _label_selector_string(sel),
                                   "empty selector is invalid for daemonset"))
    causes.extend(_validate_pod_template(tmpl, "spec.template"))
    causes.extend(_restart_always(tmpl, "spec.template"))
    deadline = _d(_d(tmpl).get("spec")).get("activeDeadlineSeconds")
    if deadline is not None:
        causes.append(_invalid("spec.template.spec.activeDeadlineSeconds", deadline,
                               "activeDeadlineSeconds in DaemonSet is not Supported"))
    causes.extend(_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    strategy = _d(spec.get("updateStrategy"))
    stype = _str(strategy.get("type"))
    if stype == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            causes.append(required("spec.updateStrategy.rollingUpdate", ""))
        else:
            causes.extend(_validate_rolling_update_daemonset(_d(rolling), "spec.updateStrategy.rollingUpdate"))
    elif stype != "OnDelete":
        causes.append(cause("FieldValueNotSupported", "spec.updateStrategy",
                            f"Unsupported value: apps.DaemonSetUpdateStrategy{{Type:{_go_quote(stype)}, "
                            f"RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}}: supported values: "
                            f'"RollingUpdate", "OnDelete"'))
    causes.extend(_nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def _validate_statefulset(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    policy = _str(spec.get("podManagementPolicy"))
    if not policy:
        causes.append(required("spec.podManagementPolicy", ""))
    elif policy not in ("OrderedReady", "Parallel"):
        causes.append(_invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    stype = _str(_d(spec.get("updateStrategy")).get("type"))
    if not stype:
        causes.append(required("spec.updateStrategy", ""))
    elif stype not in ("RollingUpdate", "OnDelete"):
        causes.append(_invalid_raw("spec.updateStrategy", f"apps.StatefulSetUpdateStrategy{{Type:{_go_quote(stype)}}}",
                                   "must be 'RollingUpdate' or 'OnDelete'"))
    causes.extend(_nonnegative(spec.get("replicas"), "spec.replicas"))
    sel = spec.get("selector")
    sel_errs: Causes = []
    if sel is None:
        causes.append(required("spec.selector", ""))
    else:
        sel_errs = validate_label_selector(sel, "spec.selector")
        causes.extend(sel_errs)
        if not _d(_d(sel).get("matchLabels")) and not _l(_d(sel).get("matchExpressions")):
            causes.append(_invalid_raw("spec.selector", _label_selector_string(sel),
                                       "empty selector is not valid for statefulset."))
    tmpl = spec.get("template")
    if not sel_errs and (sel is None or _d(sel).get("matchLabels") or _l(_d(sel).get("matchExpressions"))):
        causes.extend(_selector_mismatch(sel, tmpl, "spec.template"))
    causes.extend(_validate_pod_template(tmpl, "spec.template"))
    causes.extend(_restart_always(tmpl, "spec.template"))
    deadline = _d(_d(tmpl).get("spec")).get("activeDeadlineSeconds")
    if deadline is not None:
        causes.append(_invalid("spec.template.spec.activeDeadlineSeconds", deadline, "must not be specified"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def _validate_job_spec(spec: Obj, path: str) -> Causes:
    causes: Causes = []
    for fld in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"):
        causes.extend(_nonnegative(spec.get(fld), f"{path}.{fld}"))
    tmpl = spec.get("template")
    if spec.get("manualSelector") is True:
        sel = spec.get("selector")
        if sel is None:
            causes.append(required(f"{path}.selector", ""))
        else:
            sel_errs = validate_label_selector(sel, f"{path}.selector")
            causes.extend(sel_errs)
            if not sel_errs:
                causes.extend(_selector_mismatch(sel, tmpl, f"{path}.template"))
    causes.extend(_validate_pod_template(tmpl, f"{path}.template"))
    restart = _str(_d(_d(tmpl).get("spec")).get("restartPolicy"))
    if restart not in ("OnFailure", "Never"):
        causes.append(not_supported(f"{path}.template.spec.restartPolicy", restart, ["OnFailure", "Never"]))
    return causes


def _validate_job(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_job_spec(_d(obj.get("spec")), "spec"))
    return causes


def _validate_cronjob(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    name = _str(_d(obj.get("metadata")).get("name"))
    if len(name) > 52:
        causes.append(_invalid("metadata.name", name, "must be no more than 52 characters"))
    spec = _d(obj.get("spec"))
    if not _str(spec.get("schedule")):
        causes.append(required("spec.schedule", ""))
    causes.extend(_enum(spec.get("concurrencyPolicy"), "spec.concurrencyPolicy", ["Allow", "Forbid", "Replace"]))
    for fld in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        causes.extend(_nonnegative(spec.get(fld), f"spec.{fld}"))
    causes.extend(_validate_job_spec(_d(_d(spec.get("jobTemplate")).get("spec")), "spec.jobTemplate.spec"))
    return causes


# ---------------------------------------------------------------------------------------
# Core kinds
# ---------------------------------------------------------------------------------------


def _validate_node(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(_d(t) for t in _l(_d(obj.get("spec")).get("taints"))):
        # Upstream builds this path from "metadata", so taint errors read metadata.taints[i].
        idx = f"metadata.taints[{i}]"
        key, val, effect = _str(taint.get("key")), _str(taint.get("value")), _str(taint.get("effect"))
        causes.extend(_invalid(f"{idx}.key", key, m) for m in is_qualified_name(key))
        msgs = is_label_value(val)
        if msgs:
            causes.append(_invalid(f"{idx}.value", val, ";".join(msgs)))
        causes.extend(_enum(effect, f"{idx}.effect", _TAINT_EFFECTS))
        if (effect, key) in seen:
            rendered = (f"core.Taint{{Key:{_go_quote(key)}, Value:{_go_quote(val)}, Effect:{_go_quote(effect)}, "
                        f"TimeAdded:<nil>}}")
            causes.append(cause("FieldValueDuplicate", idx,
                                f"Duplicate value: {rendered}: taints must be unique by key and effect pair"))
            continue
        seen.add((effect, key))
    status = _d(obj.get("status"))
    for part in ("capacity", "allocatable"):
        for name, raw in _d(status.get(part)).items():
            q = _quantity(raw)
            if q is not None:
                causes.extend(_validate_quantity_value(name, q, f"status.{part}.{name}"))
    return causes


def _validate_namespace(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj, name_is_dns_label)
    for f in _l(_d(obj.get("spec")).get("finalizers")):
        f = _str(f)
        causes.extend(_invalid("spec.finalizers", f, m) for m in is_qualified_name(f))
        if "/" not in f and f not in _STANDARD_FINALIZERS:
            causes.append(_invalid("spec.finalizers", f,
                                   "name is neither a standard finalizer name nor is it fully qualified"))
    return causes


_MAX_CONFIG_SIZE = 1024 * 1024


def _b64_len(value: str) -> int:
    return len(value) * 3 // 4 - value[-2:].count("=")


def _immutable_data(obj: Obj, old: Obj | None, fields: Iterable[str]) -> Causes:
    if old is None or _d(old).get("immutable") is not True:
        return []
    causes: Causes = []
    if obj.get("immutable") is not True:
        causes.append(forbidden_field("immutable", "field is immutable when `immutable` is set"))
    for fld in fields:
        if (obj.get(fld) or {}) != (_d(old).get(fld) or {}):
            causes.append(forbidden_field(fld, "field is immutable when `immutable` is set"))
    return causes


def _validate_configmap(obj: Obj, old: Obj | None) -> Causes:
    causes = _immutable_data(obj, old, ("data", "binaryData"))
    causes.extend(validate_object_meta(obj))
    data, binary = _d(obj.get("data")), _d(obj.get("binaryData"))
    total = 0
    for key, val in data.items():
        causes.extend(_invalid(f"data[{key}]", key, m) for m in is_config_map_key(key))
        if key in binary:
            causes.append(_invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(_str(val).encode())
    for key, val in binary.items():
        causes.extend(_invalid(f"binaryData[{key}]", key, m) for m in is_config_map_key(key))
        total += _b64_len(_str(val))
    if total > _MAX_CONFIG_SIZE:
        # A root path prints as "[]" in Go's field errors.
        causes.append(too_long("[]", _MAX_CONFIG_SIZE))
    return causes


def _validate_secret(obj: Obj, old: Obj | None) -> Causes:
    causes: Causes = []
    if old is not None:
        if _str(obj.get("type")) != _str(_d(old).get("type")):
            causes.append(_invalid("type", _str(obj.get("type")), _IMMUTABLE))
        causes.extend(_immutable_data(obj, old, ("data",)))
    causes.extend(validate_object_meta(obj))
    data = _d(obj.get("data"))
    total = 0
    for key, val in data.items():
        causes.extend(_invalid(f"data[{key}]", key, m) for m in is_config_map_key(key))
        total += _b64_len(_str(val))
    for key, val in _d(obj.get("stringData")).items():
        if key not in data:
            causes.extend(_invalid(f"data[{key}]", key, m) for m in is_config_map_key(key))
            total += len(_str(val).encode())
    if total > _MAX_CONFIG_SIZE:
        causes.append(too_long("data", _MAX_CONFIG_SIZE))
    keys = set(data) | set(_d(obj.get("stringData")))
    stype = _str(obj.get("type"))
    annotations = _d(_d(obj.get("metadata")).get("annotations"))
    sa_name = _str(annotations.get("kubernetes.io/service-account.name"))
    if stype == "kubernetes.io/service-account-token" and not sa_name:
        causes.append(required("metadata.annotations[kubernetes.io/service-account.name]", ""))
    elif stype == "kubernetes.io/dockercfg" and ".dockercfg" not in keys:
        causes.append(required("data[.dockercfg]", ""))
    elif stype == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" not in keys:
        causes.append(required("data[.dockerconfigjson]", ""))
    elif stype == "kubernetes.io/basic-auth" and "username" not in keys and "password" not in keys:
        causes.extend([required("data[username]", ""), required("data[password]", "")])
    elif stype == "kubernetes.io/ssh-auth" and "ssh-privatekey" not in keys:
        causes.append(required("data[ssh-privatekey]", ""))
    elif stype == "kubernetes.io/tls":
        causes.extend(required(f"data[{k}]", "") for k in ("tls.crt", "tls.key") if k not in keys)
    return causes


_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


def _validate_service(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj, name_is_dns1035_label)
    spec = _d(obj.get("spec"))
    stype = _str(spec.get("type"))
    ports = [_d(p) for p in _l(spec.get("ports"))]
    headless = _str(spec.get("clusterIP")) == "None" or (_l(spec.get("clusterIPs"))[:1] == ["None"])
    if not ports and not headless and stype != "ExternalName":
        causes.append(required("spec.ports", ""))
    if stype == "ExternalName":
        cname = _str(spec.get("externalName"))
        cname = cname[:-1] if cname.endswith(".") else cname
        if cname:
            causes.extend(_invalid("spec.externalName", cname, m) for m in is_dns1123_subdomain(cname))
        else:
            causes.append(required("spec.externalName", ""))
    names: set[str] = set()
    for i, port in enumerate(ports):
        idx = f"spec.ports[{i}]"
        name = _str(port.get("name"))
        if len(ports) > 1 and not name:
            causes.append(required(f"{idx}.name", ""))
        elif name:
            causes.extend(_invalid(f"{idx}.name", name, m) for m in is_dns1123_label(name))
            if name in names:
                causes.append(duplicate(f"{idx}.name", name))
            names.add(name)
        num = _int(port.get("port")) or 0
        causes.extend(_invalid(f"{idx}.port", num, m) for m in is_valid_port_num(num))
        causes.extend(_enum(port.get("protocol"), f"{idx}.protocol", _PORT_PROTOCOLS))
        causes.extend(_validate_port_num_or_name(port.get("targetPort"), f"{idx}.targetPort"))
    if spec.get("selector") is not None:
        causes.extend(validate_labels(spec.get("selector"), "spec.selector"))
    causes.extend(_enum(spec.get("sessionAffinity"), "spec.sessionAffinity", ["ClientIP", "None"]))
    if spec.get("sessionAffinity") == "None" and spec.get("sessionAffinityConfig") is not None:
        causes.append(forbidden_field("spec.sessionAffinityConfig", "must not be set when session affinity is None"))
    causes.extend(_enum(stype, "spec.type", _SERVICE_TYPES))
    if stype == "ClusterIP":
        for i, port in enumerate(ports):
            if _int(port.get("nodePort")):
                causes.append(forbidden_field(f"spec.ports[{i}].nodePort",
                                              "may not be used when `type` is 'ClusterIP'"))
    seen: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        key = (_str(port.get("protocol")), _int(port.get("port")) or 0)
        if key in seen:
            rendered = f"core.ServicePort{{Name:\"\", Protocol:{_go_quote(key[0])}, AppProtocol:(*string)(nil), " \
                       f"Port:{key[1]}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}"
            causes.append(cause("FieldValueDuplicate", f"spec.ports[{i}]", f"Duplicate value: {rendered}"))
        seen.add(key)
    return causes


def _validate_service_account(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj)


_EVENT_LENGTH_LIMITS = (("reportingInstance", 128), ("action", 128), ("reason", 128), ("message", 1024))


def _validate_event(obj: Obj, old: Obj | None) -> Causes:
    """``legacyValidateEvent`` for core/v1 Events (eventTime makes it a "new" event)."""
    causes = validate_object_meta(obj)
    namespace = _str(_d(obj.get("metadata")).get("namespace"))
    involved_ns = _str(_d(obj.get("involvedObject")).get("namespace"))
    mismatch = _invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not obj.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (involved_ns and namespace != involved_ns):
            causes.append(mismatch)
        return causes
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(mismatch)
    component = _str(obj.get("reportingComponent"))
    if not component:
        causes.append(required("reportingComponent", ""))
    causes.extend(_invalid("reportingComponent", component, m) for m in is_qualified_name(component))
    for fld, limit in _EVENT_LENGTH_LIMITS:
        value = _str(obj.get(fld))
        if fld != "message" and not value:
            causes.append(required(fld, ""))
        if len(value) > limit:
            causes.append(_invalid(fld, "", f"can have at most {limit} characters"))
    return causes


# ---------------------------------------------------------------------------------------
# Other groups
# ---------------------------------------------------------------------------------------

_SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000


def _validate_priority_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    name = _str(_d(obj.get("metadata")).get("name"))
    value = _int(obj.get("value")) or 0
    if name.startswith("system-"):
        reason = ""
        if name not in _SYSTEM_PRIORITY_CLASSES:
            reason = f"{name} is not a known system priority class"
        elif value != _SYSTEM_PRIORITY_CLASSES[name]:
            reason = f"value of {name} PriorityClass must be {_SYSTEM_PRIORITY_CLASSES[name]}"
        elif obj.get("globalDefault") is True:
            reason = f"globalDefault of {name} PriorityClass must be false"
        if reason:
            causes.append(forbidden_field("metadata.name", "priority class names with 'system-' prefix are reserved "
                                                           f"for system use only. error: {reason}"))
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(forbidden_field("value", f"maximum allowed value of a user defined priority is "
                                               f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if obj.get("preemptionPolicy") is not None:
        causes.extend(_enum(obj.get("preemptionPolicy"), "preemptionPolicy", _PREEMPTION_POLICIES))
    if old is not None:
        if (_int(_d(old).get("value")) or 0) != value:
            causes.append(forbidden_field("value", "may not be changed in an update."))
        if obj.get("preemptionPolicy") != _d(old).get("preemptionPolicy"):
            causes.append(_invalid("preemptionPolicy", obj.get("preemptionPolicy"), _IMMUTABLE))
    return causes


def _validate_lease(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    duration = _int(spec.get("leaseDurationSeconds"))
    if duration is not None and duration <= 0:
        causes.append(_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = _int(spec.get("leaseTransitions"))
    if transitions is not None and transitions < 0:
        causes.append(_invalid("spec.leaseTransitions", transitions, _NEGATIVE))
    return causes


def _validate_pdb(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        ptr = "(*intstr.IntOrString)(0xc000000000)"
        sel = "(*v1.LabelSelector)(0xc000000000)" if spec.get("selector") is not None else "(*v1.LabelSelector)(nil)"
        rendered = (f"policy.PodDisruptionBudgetSpec{{MinAvailable:{ptr}, Selector:{sel}, MaxUnavailable:{ptr}, "
                    f"UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}}")
        causes.append(_invalid_raw("spec", rendered, "minAvailable and maxUnavailable cannot be both set"))
    causes.extend(_validate_int_or_percent(min_available, "spec.minAvailable"))
    causes.extend(_validate_int_or_percent(max_unavailable, "spec.maxUnavailable"))
    causes.extend(validate_label_selector(spec.get("selector"), "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("AlwaysAllow", "IfHealthyBudget"):
        causes.append(not_supported("spec.unhealthyPodEvictionPolicy", policy, ["AlwaysAllow", "IfHealthyBudget"]))
    return causes


def _validate_policy_rules(obj: Obj, namespaced: bool) -> Causes:
    causes: Causes = []
    for i, rule in enumerate(_d(r) for r in _l(obj.get("rules"))):
        path = f"rules[{i}]"
        if not _l(rule.get("verbs")):
            causes.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = _l(rule.get("nonResourceURLs"))
        if urls:
            rendered = "[]string{" + ", ".join(_go_quote(_str(u)) for u in urls) + "}"
            if namespaced:
                causes.append(_invalid_raw(f"{path}.nonResourceURLs", rendered,
                                           "namespaced rules cannot apply to non-resource URLs"))
            if _l(rule.get("apiGroups")) or _l(rule.get("resources")) or _l(rule.get("resourceNames")):
                causes.append(_invalid_raw(f"{path}.nonResourceURLs", rendered,
                                           "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not _l(rule.get("apiGroups")):
            causes.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not _l(rule.get("resources")):
            causes.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


def _validate_role(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj, name_is_path_segment) + _validate_policy_rules(obj, namespaced=True)


def _validate_cluster_role(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj, name_is_path_segment) + _validate_policy_rules(obj, namespaced=False)


_RBAC_GROUP = "rbac.authorization.k8s.io"


def _validate_binding(obj: Obj, namespaced: bool) -> Causes:
    causes = validate_object_meta(obj, name_is_path_segment)
    ref = _d(obj.get("roleRef"))
    if _str(ref.get("apiGroup")) != _RBAC_GROUP:
        causes.append(not_supported("roleRef.apiGroup", _str(ref.get("apiGroup")), [_RBAC_GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if _str(ref.get("kind")) not in kinds:
        causes.append(not_supported("roleRef.kind", _str(ref.get("kind")), kinds))
    ref_name = _str(ref.get("name"))
    if not ref_name:
        causes.append(required("roleRef.name", ""))
    else:
        causes.extend(_invalid("roleRef.name", ref_name, m) for m in name_is_path_segment(ref_name, False))
    for i, subject in enumerate(_d(s) for s in _l(obj.get("subjects"))):
        path = f"subjects[{i}]"
        name, kind, group = _str(subject.get("name")), _str(subject.get("kind")), _str(subject.get("apiGroup"))
        if not name:
            causes.append(required(f"{path}.name", ""))
        if kind == "ServiceAccount":
            if name:
                causes.extend(_invalid(f"{path}.name", name, m) for m in name_is_dns_subdomain(name, False))
            if group:
                causes.append(not_supported(f"{path}.apiGroup", group, [""]))
            if not namespaced and not _str(subject.get("namespace")):
                causes.append(required(f"{path}.namespace", ""))
        elif kind in ("User", "Group"):
            if group != _RBAC_GROUP:
                causes.append(not_supported(f"{path}.apiGroup", group, [_RBAC_GROUP]))
        else:
            causes.append(not_supported(f"{path}.kind", kind, ["ServiceAccount", "User", "Group"]))
    return causes


def _validate_role_binding(obj: Obj, old: Obj | None) -> Causes:
    return _validate_binding(obj, namespaced=True)


def _validate_cluster_role_binding(obj: Obj, old: Obj | None) -> Causes:
    return _validate_binding(obj, namespaced=False)


def _validate_generic(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj, kube=False)


def _validate_core_generic(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj)


_WEBHOOK_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_WEBHOOK_SCOPES = ["*", "Cluster", "Namespaced"]
_REVIEW_VERSIONS = ["v1", "v1beta1"]


def _validate_wildcard_list(values: Any, path: str, what: str) -> Causes:
    values = [_str(v) for v in _l(values)]
    if not values:
        return [required(path, "")]
    if len(values) > 1 and "*" in values:
        return [_invalid_raw(path, _go_string_slice(values), f"if '*' is present, must not specify other {what}")]
    return []


def _go_string_slice(values: list[str]) -> str:
    return "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"


def _validate_webhook_rule(rule: Obj, path: str) -> Causes:
    causes = _validate_wildcard_list(rule.get("operations"), f"{path}.operations", "operations")
    for i, op in enumerate(_l(rule.get("operations"))):
        if _str(op) not in _WEBHOOK_OPERATIONS:
            causes.append(not_supported(f"{path}.operations[{i}]", _str(op), _WEBHOOK_OPERATIONS))
    causes += _validate_wildcard_list(rule.get("apiGroups"), f"{path}.apiGroups", "API groups")
    causes += _validate_wildcard_list(rule.get("apiVersions"), f"{path}.apiVersions", "API versions")
    for i, version in enumerate(_l(rule.get("apiVersions"))):
        if not _str(version):
            causes.append(required(f"{path}.apiVersions[{i}]", "version must not be empty"))
    resources = [_str(r) for r in _l(rule.get("resources"))]
    if not resources:
        causes.append(required(f"{path}.resources", ""))
    for i, res in enumerate(resources):
        if not res:
            causes.append(required(f"{path}.resources[{i}]", ""))
    if len(resources) > 1 and "*/*" in resources:
        causes.append(_invalid_raw(f"{path}.resources", _go_string_slice(resources),
                                   "if '*/*' is present, must not specify other resources"))
    if rule.get("scope") is not None and _str(rule.get("scope")) not in _WEBHOOK_SCOPES:
        causes.append(not_supported(f"{path}.scope", _str(rule.get("scope")), _WEBHOOK_SCOPES))
    return causes


def _validate_webhook_client_config(cc: Any, path: str) -> Causes:
    cc = _d(cc)
    url, service = cc.get("url"), cc.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        from urllib.parse import urlsplit

        upath = f"{path}.url"
        try:
            parts = urlsplit(_str(url))
        except ValueError as exc:
            return [_invalid(upath, _str(url), f"must be a valid URL: {exc}")]
        causes = []
        if parts.scheme != "https":
            causes.append(_invalid(upath, parts.scheme, "'https' is the only allowed URL scheme"))
        if not parts.hostname:
            causes.append(_invalid(upath, parts.netloc, "host must be specified"))
        if parts.username is not None:
            causes.append(_invalid(upath, parts.netloc.rpartition("@")[0], "user information is not permitted in the URL"))
        if parts.fragment:
            causes.append(_invalid(upath, parts.fragment, "fragments are not permitted in the URL"))
        if parts.query:
            causes.append(_invalid(upath, parts.query, "query parameters are not permitted in the URL"))
        return causes
    service = _d(service)
    spath = f"{path}.service"
    causes = []
    if not _str(service.get("name")):
        causes.append(required(f"{spath}.name", "service name is required"))
    if not _str(service.get("namespace")):
        causes.append(required(f"{spath}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(_invalid(f"{spath}.port", port, "port is not valid: " + inclusive_range_error(1, 65535)))
    svc_path = _str(service.get("path"))
    if svc_path and not svc_path.startswith("/"):
        causes.append(_invalid(f"{spath}.path", svc_path, "must start with a '/'"))
    return causes


def _validate_webhook(hook: Obj, path: str, mutating: bool) -> Causes:
    name = _str(hook.get("name"))
    if not name:
        causes = [required(f"{path}.name", "")]
    else:
        causes = [_invalid(f"{path}.name", name, m) for m in is_dns1123_subdomain(name)]
        if len(name.split(".")) < 3:
            causes.append(_invalid(f"{path}.name", name, "should be a domain with at least three segments separated "
                                   "by dots"))
    for i, rule in enumerate(_l(hook.get("rules"))):
        causes += _validate_webhook_rule(_d(rule), f"{path}.rules[{i}]")
    for fld, allowed in (("failurePolicy", ["Fail", "Ignore"]), ("matchPolicy", ["Equivalent", "Exact"])):
        if hook.get(fld) is not None and _str(hook.get(fld)) not in allowed:
            causes.append(not_supported(f"{path}.{fld}", _str(hook.get(fld)), allowed))
    side_effects = hook.get("sideEffects")
    if side_effects is None or side_effects == "":
        causes.append(required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
    elif _str(side_effects) not in ("None", "NoneOnDryRun"):
        causes.append(not_supported(f"{path}.sideEffects", _str(side_effects), ["None", "NoneOnDryRun"]))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        causes.append(_invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds"))
    causes += validate_label_selector(hook.get("namespaceSelector"), f"{path}.namespaceSelector")
    causes += validate_label_selector(hook.get("objectSelector"), f"{path}.objectSelector")
    versions = [_str(v) for v in _l(hook.get("admissionReviewVersions"))]
    if not versions:
        causes.append(required(f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1"))
    elif not set(versions) & set(_REVIEW_VERSIONS):
        causes.append(_invalid_raw(f"{path}.admissionReviewVersions", _go_string_slice(versions),
                                   "must include at least one of v1, v1beta1"))
    causes += _validate_webhook_client_config(hook.get("clientConfig"), f"{path}.clientConfig")
    policy = hook.get("reinvocationPolicy")
    if mutating and policy is not None and _str(policy) not in ("IfNeeded", "Never"):
        causes.append(not_supported(f"{path}.reinvocationPolicy", _str(policy), ["IfNeeded", "Never"]))
    return causes


def _validate_webhook_configuration(obj: Obj, mutating: bool) -> Causes:
    causes = validate_object_meta(obj)
    seen: set[str] = set()
    for i, hook in enumerate(_l(obj.get("webhooks"))):
        hook = _d(hook)
        causes += _validate_webhook(hook, f"webhooks[{i}]", mutating)
        name = _str(hook.get("name"))
        if name and name in seen:
            causes.append(duplicate(f"webhooks[{i}].name", name))
        seen.add(name)
    return causes


def _validate_mutating_webhooks(obj: Obj, old: Obj | None) -> Causes:
    return _validate_webhook_configuration(obj, True)


def _validate_validating_webhooks(obj: Obj, old: Obj | None) -> Causes:
    return _validate_webhook_configuration(obj, False)


# ---------------------------------------------------------------------------------------
# Storage and the kinds kube-scheduler / kube-controller-manager inform on
# (pkg/apis/core/validation, pkg/apis/storage/validation, pkg/apis/resource/validation,
# pkg/apis/networking/validation, pkg/apis/discovery/validation, pkg/apis/autoscaling/validation,
# pkg/apis/certificates/validation, pkg/apis/node/validation, pkg/apis/admissionregistration/validation)
# ---------------------------------------------------------------------------------------

_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
_RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
_VOLUME_MODES = ["Block", "Filesystem"]
_PV_SOURCES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd", "quobyte",
    "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume", "photonPersistentDisk",
    "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi",
)
_GREATER_THAN_ZERO = "must be greater than zero"


def _go_resource_list(value: Any) -> str:
    """``%#v`` of a ``core.ResourceList`` as field errors print it (quantities by their text)."""
    if not value:
        return "core.ResourceList(nil)" if value is None else "core.ResourceList{}"
    items = ", ".join(f'"{k}":"{_str(v) if isinstance(v, str) else v}"' for k, v in sorted(_d(value).items()))
    return "core.ResourceList{" + items + "}"


def _class_name(value: Any, path: str) -> Causes:
    text = _str(value)
    return [_invalid(path, text, m) for m in name_is_dns_subdomain(text, False)] if text else []


def _access_modes(modes: Any, path: str) -> Causes:
    causes: Causes = []
    rwop = other = False
    for mode in _l(modes):
        if mode not in _ACCESS_MODES:
            causes.append(not_supported(path, mode, _ACCESS_MODES))
        elif mode == "ReadWriteOncePod":
            rwop = True
        else:
            other = True
    if rwop and other:
        causes.append(forbidden_field(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _positive_quantity(raw: Any, path: str) -> Causes:
    q = _quantity(raw)
    if q is None:
        return []
    return [_invalid(path, q.string, _GREATER_THAN_ZERO)] if q.value <= 0 else []


def _validate_pv_spec(spec: Obj, path: str = "spec") -> Causes:
    """``ValidatePersistentVolumeSpec`` (not inline): access modes, capacity, one volume source."""
    causes: Causes = []
    if not _l(spec.get("accessModes")):
        causes.append(required(f"{path}.accessModes", ""))
    causes.extend(_access_modes(spec.get("accessModes"), f"{path}.accessModes"))
    capacity = spec.get("capacity")
    if not _d(capacity):
        causes.append(required(f"{path}.capacity", ""))
    if "storage" not in _d(capacity) or len(_d(capacity)) > 1:
        causes.append(cause("FieldValueNotSupported", f"{path}.capacity",
                            f'Unsupported value: {_go_resource_list(capacity)}: supported values: "storage"'))
    for name, raw in sorted(_d(capacity).items()):
        causes.extend(_validate_resource_name(name, f"{path}.capacity[{name}]"))
        causes.extend(_positive_quantity(raw, f"{path}.capacity[{name}]"))
    policy = _str(spec.get("persistentVolumeReclaimPolicy"))
    if policy and policy not in _RECLAIM_POLICIES:
        causes.append(not_supported(f"{path}.persistentVolumeReclaimPolicy", policy, _RECLAIM_POLICIES))
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        required_terms = _d(affinity).get("required")
        if required_terms is not None:
            terms = _l(_d(required_terms).get("nodeSelectorTerms"))
            if not terms:
                causes.append(required(f"{path}.nodeAffinity.required.nodeSelectorTerms",
                                       "must have at least one node selector term"))
            for i, term in enumerate(terms):
                causes.extend(_validate_node_selector_term(_d(term), f"{path}.nodeAffinity.required."
                                                                     f"nodeSelectorTerms[{i}]", True))
    found = [k for k in _PV_SOURCES if spec.get(k) is not None]
    for extra in found[1:]:
        if extra != "flexVolume":
            causes.append(forbidden_field(f"{path}.{extra}", "may not specify more than 1 volume type"))
    if not found:
        causes.append(required(path, "must specify a volume type"))
    if "local" in found and not _d(affinity).get("required"):
        causes.append(required(f"{path}.nodeAffinity", "Local volume requires node affinity"))
    if isinstance(spec.get("hostPath"), dict) and not _str(spec["hostPath"].get("path")):
        causes.append(required(f"{path}.hostPath.path", ""))
    if isinstance(spec.get("nfs"), dict):
        if not _str(spec["nfs"].get("server")):
            causes.append(required(f"{path}.nfs.server", ""))
        if not _str(spec["nfs"].get("path")):
            causes.append(required(f"{path}.nfs.path", ""))
    if isinstance(spec.get("csi"), dict):
        if not _str(spec["csi"].get("driver")):
            causes.append(required(f"{path}.csi.driver", ""))
        if not _str(spec["csi"].get("volumeHandle")):
            causes.append(required(f"{path}.csi.volumeHandle", ""))
    if isinstance(spec.get("local"), dict) and not _str(spec["local"].get("path")):
        causes.append(required(f"{path}.local.path", ""))
    causes.extend(_class_name(spec.get("storageClassName"), f"{path}.storageClassName"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        causes.append(not_supported(f"{path}.volumeMode", mode, _VOLUME_MODES))
    vac = spec.get("volumeAttributesClassName")
    if vac is not None:
        if not _str(vac):
            causes.append(required(f"{path}.volumeAttributesClassName", "an empty string is disallowed"))
        causes.extend(_class_name(vac, f"{path}.volumeAttributesClassName"))
        if spec.get("csi") is None:
            causes.append(required(f"{path}.csi", "has to be specified when using volumeAttributesClassName"))
    return causes


def _pv_source(spec: Obj) -> Obj:
    return {k: spec.get(k) for k in _PV_SOURCES if spec.get(k) is not None}


def _validate_persistent_volume(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(_validate_pv_spec(spec))
    if old is not None:
        old_spec = _d(old.get("spec"))
        if _semantic(_pv_source(spec)) != _semantic(_pv_source(old_spec)):
            causes.append(forbidden_field("spec.persistentvolumesource",
                                          "spec.persistentvolumesource is immutable after creation"))
        if spec.get("volumeMode") != old_spec.get("volumeMode"):
            causes.append(_invalid("volumeMode", spec.get("volumeMode"), _IMMUTABLE))
        if old_spec.get("volumeAttributesClassName") is not None and spec.get("volumeAttributesClassName") is None:
            causes.append(forbidden_field("spec.volumeAttributesClassName",
                                          "update from non-nil value to nil is forbidden"))
    return causes


def _validate_data_source(ref: Any, path: str, namespaced: bool) -> Causes:
    ref = _d(ref)
    causes: Causes = []
    if not _str(ref.get("name")):
        causes.append(required(f"{path}.name", ""))
    if not _str(ref.get("kind")):
        causes.append(required(f"{path}.kind", ""))
    group = _str(ref.get("apiGroup"))
    if not group and ref.get("kind") != "PersistentVolumeClaim":
        causes.append(_invalid(path, _str(ref.get("kind")),
                               "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
    if group:
        causes.extend(_invalid(f"{path}.apiGroup", group, m) for m in is_dns1123_subdomain(group))
    if namespaced and _str(ref.get("namespace")):
        causes.extend(_invalid(f"{path}.namespace", ref["namespace"], m)
                      for m in name_is_dns_label(ref["namespace"], False))
    return causes


def validate_pvc_spec(spec: Obj, path: str) -> Causes:
    """``ValidatePersistentVolumeClaimSpec`` (also for ephemeral volume and StatefulSet templates)."""
    causes: Causes = []
    if not _l(spec.get("accessModes")):
        causes.append(required(f"{path}.accessModes", "at least 1 access mode is required"))
    if spec.get("selector") is not None:
        causes.extend(validate_label_selector(spec.get("selector"), f"{path}.selector"))
    causes.extend(_access_modes(spec.get("accessModes"), f"{path}.accessModes"))
    requests = _d(_d(spec.get("resources")).get("requests"))
    storage_path = f"{path}.resources[storage]"
    if "storage" not in requests:
        causes.append(required(storage_path, ""))
    else:
        positive = _positive_quantity(requests["storage"], storage_path)
        causes.extend(positive)
        q = _quantity(requests["storage"])
        if not positive and q is not None:
            causes.extend(_validate_quantity_value("storage", q, storage_path))
    causes.extend(_class_name(spec.get("storageClassName"), f"{path}.storageClassName"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        causes.append(not_supported(f"{path}.volumeMode", mode, _VOLUME_MODES))
    if spec.get("dataSource") is not None:
        causes.extend(_validate_data_source(spec["dataSource"], f"{path}.dataSource", False))
    if spec.get("dataSourceRef") is not None:
        causes.extend(_validate_data_source(spec["dataSourceRef"], f"{path}.dataSourceRef", True))
    causes.extend(_class_name(spec.get("volumeAttributesClassName"), f"{path}.volumeAttributesClassName"))
    return causes


def _validate_pvc(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(validate_pvc_spec(spec, "spec"))
    if old is None:
        return causes
    old_spec = _d(old.get("spec"))
    # The PV controller binds a claim once (volumeName), a bound claim may grow; nothing else changes.
    comparable_new, comparable_old = dict(spec), dict(old_spec)
    if not _str(old_spec.get("volumeName")):
        comparable_old["volumeName"] = spec.get("volumeName")
    if old_spec.get("storageClassName") is None:
        comparable_old["storageClassName"] = spec.get("storageClassName")
    for part in (comparable_new, comparable_old):
        part.pop("volumeAttributesClassName", None)
        if _str(_d(obj.get("status")).get("phase")) == "Bound":
            res = dict(_d(part.get("resources")))
            res["requests"] = {k: v for k, v in _d(res.get("requests")).items() if k != "storage"}
            part["resources"] = res
    if _semantic(comparable_new) != _semantic(comparable_old):
        causes.append(forbidden_field("spec", "spec is immutable after creation except resources.requests and "
                                              "volumeAttributesClassName for bound claims"))
    new_size = _quantity(_d(_d(spec.get("resources")).get("requests")).get("storage"))
    old_size = _quantity(_d(_d(old_spec.get("resources")).get("requests")).get("storage"))
    if new_size is not None and old_size is not None and new_size.value < old_size.value:
        status_size = _quantity(_d(_d(old.get("status")).get("capacity")).get("storage"))
        if status_size is None or new_size.value <= status_size.value:
            causes.append(forbidden_field("spec.resources.requests.storage",
                                          "field can not be less than status.capacity"))
    if spec.get("volumeMode") != old_spec.get("volumeMode"):
        causes.append(_invalid("volumeMode", spec.get("volumeMode"), _IMMUTABLE))
    return causes


def _rc_selector_as_label_selector(sel: Any) -> Any:
    return {"matchLabels": sel} if isinstance(sel, dict) else None


def _validate_replication_controller(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateReplicationController``: a map selector that the template's labels must match."""
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(_nonnegative(spec.get("replicas"), "spec.replicas"))
    causes.extend(_nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    sel = spec.get("selector")
    if not _d(sel):
        causes.append(required("spec.selector", ""))
    else:
        causes.extend(validate_labels(sel, "spec.selector"))
    tmpl = spec.get("template")
    if tmpl is None:
        causes.append(required("spec.template", ""))
        return causes
    if _d(sel):
        labels = _d(_d(_d(tmpl).get("metadata")).get("labels"))
        if any(labels.get(k) != v for k, v in _d(sel).items()):
            causes.append(_invalid_raw("spec.template.metadata.labels", go_string_map(labels or None),
                                       "`selector` does not match template `labels`"))
    causes.extend(_validate_pod_template(tmpl, "spec.template"))
    causes.extend(_restart_always(tmpl, "spec.template"))
    if _d(_d(tmpl).get("spec")).get("activeDeadlineSeconds") is not None:
        causes.append(forbidden_field("spec.template.spec.activeDeadlineSeconds",
                                      "activeDeadlineSeconds in ReplicationController is not Supported"))
    return causes


def _validate_pod_template_kind(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_pod_template(obj.get("template"), "template"))
    return causes


_QUOTA_SCOPES = ["BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass",
                 "Terminating", "VolumeAttributesClass"]


def _validate_resource_list(values: Any, path: str) -> Causes:
    causes: Causes = []
    for name, raw in sorted(_d(values).items()):
        causes.extend(_validate_resource_name(name, f"{path}[{name}]"))
        q = _quantity(raw)
        if q is not None:
            causes.extend(_validate_quantity_value(name, q, f"{path}[{name}]"))
    return causes


def _validate_resource_quota(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(_validate_resource_list(spec.get("hard"), "spec.hard"))
    status = _d(obj.get("status"))
    causes.extend(_validate_resource_list(status.get("hard"), "status.hard"))
    causes.extend(_validate_resource_list(status.get("used"), "status.used"))
    for i, scope in enumerate(_l(spec.get("scopes"))):
        if scope not in _QUOTA_SCOPES:
            causes.append(not_supported(f"spec.scopes[{i}]", scope, _QUOTA_SCOPES))
    for i, expr in enumerate(_d(e) for e in _l(_d(spec.get("scopeSelector")).get("matchExpressions"))):
        epath = f"spec.scopeSelector.matchExpressions[{i}]"
        if expr.get("scopeName") not in _QUOTA_SCOPES:
            causes.append(not_supported(f"{epath}.scopeName", expr.get("scopeName"), _QUOTA_SCOPES))
        if expr.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            causes.append(not_supported(f"{epath}.operator", expr.get("operator"),
                                        ["DoesNotExist", "Exists", "In", "NotIn"]))
    return causes


def _validate_limit_range(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateLimitRange``: one item per type; min <= defaultRequest <= default <= max."""
    causes = validate_object_meta(obj)
    seen: set[str] = set()
    for i, item in enumerate(_d(x) for x in _l(_d(obj.get("spec")).get("limits"))):
        path = f"spec.limits[{i}]"
        ltype = _str(item.get("type"))
        if not ltype:
            causes.append(required(f"{path}.type", ""))
        elif ltype in seen:
            causes.append(duplicate(f"{path}.type", ltype))
        seen.add(ltype)
        parts = {p: _d(item.get(p)) for p in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
        for part, values in parts.items():
            causes.extend(_validate_resource_list(values, f"{path}.{part}"))
        if ltype == "Pod" and (parts["default"] or parts["defaultRequest"]):
            key = "default" if parts["default"] else "defaultRequest"
            causes.append(forbidden_field(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
        for name in sorted(set().union(*(v.keys() for v in parts.values()))):
            q = {p: _quantity(v.get(name)) for p, v in parts.items()}
            lo, hi = q["min"], q["max"]
            if lo is not None and hi is not None and lo.value > hi.value:
                causes.append(_invalid_raw(f"{path}.min[{name}]", _fmt(lo.string),
                                           f"min value {lo.string} is greater than max value {hi.string}"))
            dr, df = q["defaultRequest"], q["default"]
            if dr is not None and hi is not None and dr.value > hi.value:
                causes.append(_invalid_raw(f"{path}.defaultRequest[{name}]", _fmt(dr.string),
                                           f"default request value {dr.string} is greater than max value {hi.string}"))
            if dr is not None and df is not None and dr.value > df.value:
                causes.append(_invalid_raw(f"{path}.defaultRequest[{name}]", _fmt(dr.string),
                                           f"default request value {dr.string} is greater than default limit value "
                                           f"{df.string}"))
            if df is not None and hi is not None and df.value > hi.value:
                causes.append(_invalid_raw(f"{path}.default[{name}]", _fmt(df.string),
                                           f"default value {df.string} is greater than max value {hi.string}"))
    return causes


def _validate_controller_revision(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateControllerRevisionCreate``/``Update``: revision >= 0; data is set once."""
    causes = validate_object_meta(obj)
    if "data" not in obj or obj.get("data") is None:
        causes.append(required("data", "data is mandatory"))
    causes.extend(_nonnegative(obj.get("revision"), "revision"))
    if old is not None and _semantic(obj.get("data")) != _semantic(old.get("data")):
        causes.append(_invalid_raw("data", "runtime.RawExtension{...}", _IMMUTABLE))
    return causes


# -- storage.k8s.io/v1 ------------------------------------------------------------------------

_SC_RECLAIM_POLICIES = ["Delete", "Retain"]
_BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
_MAX_PARAMETERS_SIZE = 256 * 1024


def _validate_parameters(params: Any, path: str) -> Causes:
    causes: Causes = []
    total = 0
    for key, value in _d(params).items():
        if not key:
            causes.append(_invalid(path, key, "field can not be empty."))
        total += len(key) + len(_str(value))
    if total > _MAX_PARAMETERS_SIZE:
        causes.append(too_long(path, _MAX_PARAMETERS_SIZE))
    return causes


def _validate_provisioner(value: Any, path: str) -> Causes:
    text = _str(value)
    if not text:
        return [required(path, "")]
    return [_invalid(path, text.lower(), m) for m in is_qualified_name(text.lower())]


def _validate_storage_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_provisioner(obj.get("provisioner"), "provisioner"))
    causes.extend(_validate_parameters(obj.get("parameters"), "parameters"))
    policy = obj.get("reclaimPolicy")
    if _str(policy) and policy not in _SC_RECLAIM_POLICIES:
        causes.append(not_supported("reclaimPolicy", policy, _SC_RECLAIM_POLICIES))
    mode = obj.get("volumeBindingMode")
    if mode is None:
        causes.append(required("volumeBindingMode", ""))
    elif mode not in _BINDING_MODES:
        causes.append(not_supported("volumeBindingMode", mode, _BINDING_MODES))
    for i, term in enumerate(_d(t) for t in _l(obj.get("allowedTopologies"))):
        exprs = _l(term.get("matchLabelExpressions"))
        if not exprs:
            causes.append(required(f"allowedTopologies[{i}].matchLabelExpressions", "must have at least one "
                                                                                   "label expression"))
        for j, expr in enumerate(_d(e) for e in exprs):
            epath = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            key = _str(expr.get("key"))
            causes.extend(_invalid(f"{epath}.key", key, m) for m in is_qualified_name(key))
            if not _l(expr.get("values")):
                causes.append(required(f"{epath}.values", "must specify as least one value"))
    if old is not None:
        if _semantic(_d(obj.get("parameters"))) != _semantic(_d(old.get("parameters"))):
            causes.append(forbidden_field("parameters", "updates to parameters are forbidden."))
        if obj.get("provisioner") != old.get("provisioner"):
            causes.append(forbidden_field("provisioner", "updates to provisioner are forbidden."))
        if obj.get("reclaimPolicy") != old.get("reclaimPolicy"):
            causes.append(forbidden_field("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
        if obj.get("volumeBindingMode") != old.get("volumeBindingMode"):
            causes.append(_invalid("volumeBindingMode", mode, _IMMUTABLE))
    return causes


def _csi_driver_name(value: Any, path: str) -> Causes:
    """``validateCSIDriverName``: required, at most 63 characters, a DNS-1123 subdomain."""
    name = _str(value)
    if not name:
        return [required(path, name)]
    causes: Causes = []
    if len(name) > 63:
        causes.append(too_long(path, 63))
    lowered = name.lower()
    causes.extend(_invalid(path, name, m) for m in is_dns1123_subdomain(lowered))
    return causes


_FS_GROUP_POLICIES = ["File", "None", "ReadWriteOnceWithFSType"]
_LIFECYCLE_MODES = ["Ephemeral", "Persistent"]


def _validate_csi_driver(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_csi_driver_name(_d(obj.get("metadata")).get("name"), "metadata.name"))
    spec = _d(obj.get("spec"))
    for flag in ("attachRequired", "podInfoOnMount", "requiresRepublish", "storageCapacity", "seLinuxMount"):
        if spec.get(flag) is None:
            causes.append(required(f"spec.{flag}", ""))
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in _FS_GROUP_POLICIES:
        causes.append(not_supported("spec.fsGroupPolicy", policy, _FS_GROUP_POLICIES))
    for i, mode in enumerate(_l(spec.get("volumeLifecycleModes"))):
        if mode not in _LIFECYCLE_MODES:
            causes.append(not_supported(f"spec.volumeLifecycleModes[{i}]", mode, _LIFECYCLE_MODES))
    audiences: set[str] = set()
    for i, token in enumerate(_d(t) for t in _l(spec.get("tokenRequests"))):
        audience = _str(token.get("audience"))
        if audience in audiences:
            causes.append(duplicate(f"spec.tokenRequests[{i}].audience", audience))
        audiences.add(audience)
        seconds = _int(token.get("expirationSeconds"))
        if seconds is not None and seconds < 600:
            causes.append(_invalid(f"spec.tokenRequests[{i}].expirationSeconds", seconds,
                                   "may not specify a duration less than 10 minutes"))
    if old is not None and spec.get("attachRequired") != _d(old.get("spec")).get("attachRequired"):
        causes.append(_invalid("spec.attachRequired", spec.get("attachRequired"), _IMMUTABLE))
    return causes


def _validate_csi_node(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    names: set[str] = set()
    for i, drv in enumerate(_d(d) for d in _l(_d(obj.get("spec")).get("drivers"))):
        path = f"spec.drivers[{i}]"
        causes.extend(_csi_driver_name(drv.get("name"), f"{path}.name"))
        if _str(drv.get("name")) in names:
            causes.append(duplicate(f"{path}.name", drv.get("name")))
        names.add(_str(drv.get("name")))
        node_id = _str(drv.get("nodeID"))
        if not node_id:
            causes.append(required(f"{path}.nodeID", node_id))
        elif len(node_id) > 192:
            causes.append(too_long(f"{path}.nodeID", 192))
        count = _int(_d(drv.get("allocatable")).get("count"))
        if count is not None and count < 0:
            causes.append(_invalid(f"{path}.allocatable.count", count, _NEGATIVE))
        for j, key in enumerate(_l(drv.get("topologyKeys"))):
            causes.extend(_invalid(f"{path}.topologyKeys[{j}]", _str(key), m) for m in is_qualified_name(_str(key)))
    return causes


def _validate_csi_storage_capacity(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(validate_label_selector(obj.get("nodeTopology"), "nodeTopology"))
    name = _str(obj.get("storageClassName"))
    if not name:
        causes.append(required("storageClassName", ""))
    else:
        causes.extend(_invalid("storageClassName", name, m) for m in name_is_dns_subdomain(name, False))
    for part in ("capacity", "maximumVolumeSize"):
        q = _quantity(obj.get(part))
        if q is not None and q.value < 0:
            causes.append(_invalid(part, q.string, _NEGATIVE))
    if old is not None:
        for part in ("storageClassName", "nodeTopology"):
            if _semantic(obj.get(part)) != _semantic(old.get(part)):
                causes.append(_invalid_raw(part, _fmt(obj.get(part)) if part == "storageClassName"
                                           else _label_selector_string(obj.get(part)), _IMMUTABLE))
    return causes


def _validate_volume_attachment(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateVolumeAttachment``: attacher, nodeName and exactly one source."""
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    if not _str(spec.get("attacher")):
        causes.append(required("spec.attacher", ""))
    else:
        causes.extend(_csi_driver_name(spec.get("attacher"), "spec.attacher"))
    source = _d(spec.get("source"))
    count = 0
    if source.get("persistentVolumeName") is not None:
        count += 1
        if not _str(source.get("persistentVolumeName")):
            causes.append(required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"))
    if source.get("inlineVolumeSpec") is not None:
        count += 1
        inline = _d(source.get("inlineVolumeSpec"))
        if inline.get("csi") is None:
            causes.append(required("spec.source.inlineVolumeSpec.csi",
                                   "has to be specified in the context of inline volumes"))
    if count == 0:
        causes.append(required("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
    elif count > 1:
        causes.append(forbidden_field("spec.source",
                                      "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
    node = _str(spec.get("nodeName"))
    if not node:
        causes.append(required("spec.nodeName", ""))
    else:
        causes.extend(_invalid("spec.nodeName", node, m) for m in name_is_dns_subdomain(node, False))
    if old is not None and _semantic(spec) != _semantic(_d(old.get("spec"))):
        causes.append(forbidden_field("spec", "spec is immutable after creation"))
    return causes


def _validate_volume_attributes_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_provisioner(obj.get("driverName"), "driverName"))
    causes.extend(_validate_parameters(obj.get("parameters"), "parameters"))
    if old is not None:
        if _semantic(_d(obj.get("parameters"))) != _semantic(_d(old.get("parameters"))):
            causes.append(forbidden_field("parameters", "updates to parameters are forbidden."))
        if obj.get("driverName") != old.get("driverName"):
            causes.append(forbidden_field("driverName", "updates to driverName are forbidden."))
    return causes


# -- resource.k8s.io/v1 -----------------------------------------------------------------------

_ALLOCATION_MODES = ["All", "ExactCount"]
_MAX_REQUESTS = 32


def _dns_label_name(value: Any, path: str) -> Causes:
    text = _str(value)
    if not text:
        return [required(path, "")]
    return [_invalid(path, text, m) for m in is_dns1123_label(text)]


def _validate_cel_selectors(selectors: Any, path: str) -> Causes:
    causes: Causes = []
    for i, sel in enumerate(_d(s) for s in _l(selectors)):
        cel = sel.get("cel")
        if cel is None:
            causes.append(required(f"{path}[{i}].cel", ""))
        elif not _str(_d(cel).get("expression")):
            causes.append(required(f"{path}[{i}].cel.expression", ""))
    return causes


def _validate_exact_request(req: Obj, path: str) -> Causes:
    causes: Causes = []
    class_name = _str(req.get("deviceClassName"))
    if not class_name:
        causes.append(required(f"{path}.deviceClassName", ""))
    else:
        causes.extend(_invalid(f"{path}.deviceClassName", class_name, m)
                      for m in name_is_dns_subdomain(class_name, False))
    causes.extend(_validate_cel_selectors(req.get("selectors"), f"{path}.selectors"))
    mode = _str(req.get("allocationMode"))
    if mode == "ExactCount":
        count = _int(req.get("count"))
        if count is not None and count <= 0:
            causes.append(_invalid(f"{path}.count", count, _GREATER_THAN_ZERO))
    elif mode == "All":
        if req.get("count") not in (None, 0):
            causes.append(_invalid(f"{path}.count", req.get("count"),
                                   "must not be specified when allocationMode is 'All'"))
    else:
        causes.append(not_supported(f"{path}.allocationMode", mode, _ALLOCATION_MODES))
    return causes


def validate_device_claim(spec: Obj, path: str) -> Causes:
    """``validateDeviceClaim``: named requests, each with exactly one of ``exactly``/``firstAvailable``."""
    devices = _d(spec.get("devices"))
    requests = _l(devices.get("requests"))
    causes: Causes = []
    if len(requests) > _MAX_REQUESTS:
        causes.append(cause("FieldValueTooMany", f"{path}.devices.requests",
                            f"Too many: {len(requests)}: must have at most {_MAX_REQUESTS} items"))
    names: set[str] = set()
    for i, req in enumerate(_d(r) for r in requests):
        rpath = f"{path}.devices.requests[{i}]"
        name = _str(req.get("name"))
        causes.extend(_dns_label_name(name, f"{rpath}.name"))
        if name and name in names:
            causes.append(duplicate(f"{rpath}.name", name))
        names.add(name)
        exactly, first = req.get("exactly"), req.get("firstAvailable")
        if (exactly is None) == (first is None):
            detail = "exactly one of `exactly` or `firstAvailable` is required"
            causes.append(required(rpath, detail) if exactly is None else _invalid_raw(rpath, "{...}", detail))
        if exactly is not None:
            causes.extend(_validate_exact_request(_d(exactly), f"{rpath}.exactly"))
        for j, sub in enumerate(_d(s) for s in _l(first)):
            spath = f"{rpath}.firstAvailable[{j}]"
            causes.extend(_dns_label_name(sub.get("name"), f"{spath}.name"))
            causes.extend(_validate_exact_request(sub, spath))
    for i, constraint in enumerate(_d(c) for c in _l(devices.get("constraints"))):
        for j, ref in enumerate(_l(constraint.get("requests"))):
            if _str(ref).split("/")[0] not in names:
                causes.append(_invalid(f"{path}.devices.constraints[{i}].requests[{j}]", ref,
                                       "must be the name of a request in the claim or the name of a request and "
                                       "a subrequest separated by '/'"))
    return causes


def _validate_device_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(_validate_cel_selectors(spec.get("selectors"), "spec.selectors"))
    ext = spec.get("extendedResourceName")
    if ext is not None and not is_extended_resource(_str(ext)):
        causes.append(_invalid("spec.extendedResourceName", ext, "must be a valid extended resource name"))
    return causes


def _validate_resource_slice(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateResourceSlice``: driver, pool, and exactly one node selection field."""
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    driver = _str(spec.get("driver"))
    if not driver:
        causes.append(required("spec.driver", ""))
    else:
        causes.extend(_csi_driver_name(driver, "spec.driver"))
    pool = _d(spec.get("pool"))
    if not _str(pool.get("name")):
        causes.append(required("spec.pool.name", ""))
    causes.extend(_nonnegative(pool.get("generation"), "spec.pool.generation"))
    count = _int(pool.get("resourceSliceCount"))
    if count is None or count <= 0:
        causes.append(_invalid("spec.pool.resourceSliceCount", count if count is not None else 0, _GREATER_THAN_ZERO))
    choices = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
               if spec.get(k) not in (None, False, "")]
    detail = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not choices:
        causes.append(required("spec", detail))
    elif len(choices) > 1:
        causes.append(_invalid_raw("spec", "{" + ", ".join(f'"{c}"' for c in choices) + "}", detail))
    if _str(spec.get("nodeName")):
        causes.extend(_invalid("spec.nodeName", spec["nodeName"], m)
                      for m in name_is_dns_subdomain(spec["nodeName"], False))
    names: set[str] = set()
    for i, dev in enumerate(_d(d) for d in _l(spec.get("devices"))):
        name = _str(dev.get("name"))
        causes.extend(_dns_label_name(name, f"spec.devices[{i}].name"))
        if name and name in names:
            causes.append(duplicate(f"spec.devices[{i}].name", name))
        names.add(name)
    if old is not None:
        old_spec = _d(old.get("spec"))
        for part in ("nodeName", "driver"):
            if spec.get(part) != old_spec.get(part):
                causes.append(_invalid(f"spec.{part}", spec.get(part), _IMMUTABLE))
    return causes


def _validate_resource_claim(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(validate_device_claim(spec, "spec"))
    if old is not None and _semantic(spec) != _semantic(_d(old.get("spec"))):
        causes.append(_invalid_raw("spec", "core.ResourceClaimSpec{...}", _IMMUTABLE))
    reserved = _l(_d(obj.get("status")).get("reservedFor"))
    if len(reserved) > 256:
        causes.append(cause("FieldValueTooMany", "status.reservedFor",
                            f"Too many: {len(reserved)}: must have at most 256 items"))
    return causes


def _validate_resource_claim_template(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    tmpl = _d(obj.get("spec"))
    md = _d(tmpl.get("metadata"))
    causes.extend(validate_labels(md.get("labels"), "spec.metadata.labels"))
    causes.extend(validate_annotations(md.get("annotations"), "spec.metadata.annotations"))
    causes.extend(validate_device_claim(_d(tmpl.get("spec")), "spec.spec"))
    if old is not None and _semantic(tmpl) != _semantic(_d(old.get("spec"))):
        causes.append(_invalid_raw("spec", "resource.ResourceClaimTemplateSpec{...}", _IMMUTABLE))
    return causes


# -- events.k8s.io/v1 -------------------------------------------------------------------------


def _validate_events_v1(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateEventCreate`` for ``events.k8s.io/v1``: the legacy rules plus the strict ones.

    Paths are those of the stored (core) form, as kube reports them.
    """
    from koordinator.apiserver.conversions import EVENTS_V1

    core = EVENTS_V1.to_storage(obj)
    # The legacy checks name the reporting field as the request's API does.
    causes = [{**c, "field": "reportingController"} if c["field"] == "reportingComponent" else c
              for c in _validate_event(core, None)]
    if old is not None:
        return causes
    if not core.get("eventTime"):
        causes.append(required("eventTime", ""))
    series = core.get("series")
    if series is not None:
        count = _int(_d(series).get("count"))
        if count is None or count < 2:
            causes.append(_invalid("series.count", "", "should be at least 2"))
        if not _d(series).get("lastObservedTime"):
            causes.append(required("series.lastObservedTime", ""))
    if core.get("type") not in ("Normal", "Warning"):
        causes.append(_invalid("type", "", f"has invalid value: {_str(core.get('type'))}"))
    for fld in ("firstTimestamp", "lastTimestamp"):
        if core.get(fld):
            causes.append(_invalid(fld, "", "needs to be unset"))
    if core.get("count"):
        causes.append(_invalid("count", "", "needs to be unset"))
    if _d(core.get("source")).get("component") or _d(core.get("source")).get("host"):
        causes.append(_invalid("source", "", "needs to be unset"))
    return causes


# -- discovery.k8s.io/v1 ----------------------------------------------------------------------

_ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]


def _validate_endpoint_slice(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    address_type = _str(obj.get("addressType"))
    if address_type not in _ADDRESS_TYPES:
        causes.append(not_supported("addressType", address_type, _ADDRESS_TYPES))
    endpoints = _l(obj.get("endpoints"))
    if len(endpoints) > 1000:
        causes.append(cause("FieldValueTooMany", "endpoints", f"Too many: {len(endpoints)}: must have at most 1000 "
                                                              "items"))
    for i, ep in enumerate(_d(e) for e in endpoints):
        addresses = _l(ep.get("addresses"))
        if not addresses:
            causes.append(required(f"endpoints[{i}].addresses", "must contain at least 1 address"))
        elif len(addresses) > 100:
            causes.append(cause("FieldValueTooMany", f"endpoints[{i}].addresses",
                                f"Too many: {len(addresses)}: must have at most 100 items"))
        if _str(ep.get("nodeName")):
            causes.extend(_invalid(f"endpoints[{i}].nodeName", ep["nodeName"], m)
                          for m in name_is_dns_subdomain(ep["nodeName"], False))
        if _str(ep.get("hostname")):
            causes.extend(_invalid(f"endpoints[{i}].hostname", ep["hostname"], m)
                          for m in is_dns1123_label(ep["hostname"]))
    names: set[str] = set()
    for i, port in enumerate(_d(p) for p in _l(obj.get("ports"))):
        name = _str(port.get("name"))
        if name:
            causes.extend(_invalid(f"ports[{i}].name", name, m) for m in is_dns1123_label(name))
        if name in names:
            causes.append(duplicate(f"ports[{i}].name", name))
        names.add(name)
        if port.get("protocol") is not None and port["protocol"] not in _PORT_PROTOCOLS:
            causes.append(not_supported(f"ports[{i}].protocol", port["protocol"], _PORT_PROTOCOLS))
        number = _int(port.get("port"))
        if number is not None:
            causes.extend(_invalid(f"ports[{i}].port", number, m) for m in is_valid_port_num(number))
    if old is not None and obj.get("addressType") != old.get("addressType"):
        causes.append(_invalid("addressType", obj.get("addressType"), _IMMUTABLE))
    return causes


# -- autoscaling ------------------------------------------------------------------------------

_METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
_METRIC_SOURCE_FIELDS = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
                         "Object": "object", "External": "external"}


def _validate_metric_target(target: Any, path: str) -> Causes:
    target = _d(target)
    ttype = _str(target.get("type"))
    causes: Causes = []
    if not ttype:
        causes.append(required(f"{path}.type", "must specify a metric target type"))
    elif ttype not in ("AverageValue", "Utilization", "Value"):
        causes.append(not_supported(f"{path}.type", ttype, ["AverageValue", "Utilization", "Value"]))
    if target.get("value") is None and target.get("averageValue") is None and target.get("averageUtilization") is None:
        causes.append(required(path, "must set either a target value, average value, or average utilization"))
    utilization = _int(target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        causes.append(_invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return causes


def _validate_hpa_v2(obj: Obj) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    ref = _d(spec.get("scaleTargetRef"))
    if not _str(ref.get("kind")):
        causes.append(required("spec.scaleTargetRef.kind", ""))
    else:
        causes.extend(_invalid("spec.scaleTargetRef.kind", ref["kind"], m)
                      for m in name_is_path_segment(ref["kind"], False))
    if not _str(ref.get("name")):
        causes.append(required("spec.scaleTargetRef.name", ""))
    else:
        causes.extend(_invalid("spec.scaleTargetRef.name", ref["name"], m)
                      for m in name_is_path_segment(ref["name"], False))
    min_replicas = _int(spec.get("minReplicas"))
    if min_replicas is not None and min_replicas < 1:
        causes.append(_invalid("spec.minReplicas", min_replicas, "must be greater than or equal to 1"))
    max_replicas = _int(spec.get("maxReplicas"))
    if max_replicas is None or max_replicas < 1:
        causes.append(_invalid("spec.maxReplicas", max_replicas or 0, "must be greater than 0"))
    elif min_replicas is not None and max_replicas < min_replicas:
        causes.append(_invalid("spec.maxReplicas", max_replicas, "must be greater than or equal to `minReplicas`"))
    for i, metric in enumerate(_d(m) for m in _l(spec.get("metrics"))):
        mpath = f"spec.metrics[{i}]"
        mtype = _str(metric.get("type"))
        if not mtype:
            causes.append(required(f"{mpath}.type", "must specify a metric source type"))
            continue
        if mtype not in _METRIC_TYPES:
            causes.append(not_supported(f"{mpath}.type", mtype, _METRIC_TYPES))
            continue
        field = _METRIC_SOURCE_FIELDS[mtype]
        source = metric.get(field)
        if source is None:
            causes.append(required(f"{mpath}.{field}", f"must populate information for the given metric source"))
            continue
        source = _d(source)
        if mtype in ("Resource", "ContainerResource") and not _str(source.get("name")):
            causes.append(required(f"{mpath}.{field}.name", "must specify a resource name"))
        if mtype == "ContainerResource" and not _str(source.get("container")):
            causes.append(required(f"{mpath}.{field}.container", "must specify a container"))
        if mtype in ("Pods", "Object", "External") and not _str(_d(source.get("metric")).get("name")):
            causes.append(required(f"{mpath}.{field}.metric.name", "must specify a metric name"))
        causes.extend(_validate_metric_target(source.get("target"), f"{mpath}.{field}.target"))
    return causes


def _validate_hpa(obj: Obj, old: Obj | None) -> Causes:
    """Both served versions validate the stored (v2) form, as kube validates the internal one."""
    if obj.get("apiVersion") == "autoscaling/v1":
        from koordinator.apiserver.conversions import HPA_V1

        obj = HPA_V1.to_storage(obj)
    return _validate_hpa_v2(obj)


# -- certificates.k8s.io/v1 -------------------------------------------------------------------

_KEY_USAGES = [
    "any", "cert sign", "client auth", "code signing", "content commitment", "crl sign", "data encipherment",
    "decipher only", "digital signature", "email protection", "encipher only", "ipsec end system", "ipsec tunnel",
    "ipsec user", "key agreement", "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing",
    "s/mime", "server auth", "signing", "timestamping",
]
_PEM_CSR_RE = re.compile(r"-----BEGIN CERTIFICATE REQUEST-----\s+[A-Za-z0-9+/=\s]+-----END CERTIFICATE REQUEST-----")


def _validate_signer_name(name: str, path: str) -> Causes:
    if not name:
        return [required(path, "")]
    domain, slash, rest = name.partition("/")
    if not slash or not rest:
        return [_invalid(path, name, "must be a fully qualified domain and path of the form "
                                     "'example.com/signer-name'")]
    causes = [_invalid(path, name, m) for m in is_dns1123_subdomain(domain)]
    return causes


def _validate_csr(obj: Obj, old: Obj | None) -> Causes:
    import base64 as _b64

    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    raw = spec.get("request")
    try:
        decoded = _b64.b64decode(_str(raw), validate=True).decode("ascii", "replace") if raw else ""
    except ValueError:
        decoded = ""
    if not _PEM_CSR_RE.search(decoded):
        causes.append(_invalid_raw("spec.request", "[]byte{...}" if raw else "[]byte(nil)",
                                   "PEM block type must be CERTIFICATE REQUEST"))
    causes.extend(_validate_signer_name(_str(spec.get("signerName")), "spec.signerName"))
    usages = _l(spec.get("usages"))
    if not usages:
        causes.append(required("spec.usages", ""))
    for i, usage in enumerate(usages):
        if usage not in _KEY_USAGES:
            causes.append(not_supported(f"spec.usages[{i}]", usage, _KEY_USAGES))
    seconds = _int(spec.get("expirationSeconds"))
    if seconds is not None and seconds < 600:
        causes.append(_invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 600 seconds "
                                                                  "(10 minutes)"))
    types: set[str] = set()
    for i, cond in enumerate(_d(c) for c in _l(_d(obj.get("status")).get("conditions"))):
        ctype = _str(cond.get("type"))
        if not ctype:
            causes.append(required(f"status.conditions[{i}].type", ""))
        elif ctype in ("Approved", "Denied", "Failed") and ctype in types:
            causes.append(duplicate(f"status.conditions[{i}].type", ctype))
        types.add(ctype)
    if "Approved" in types and "Denied" in types:
        causes.append(_invalid("status.conditions", "Approved",
                               "Approved and Denied conditions are mutually exclusive"))
    if old is not None and _semantic(spec) != _semantic(_d(old.get("spec"))):
        causes.append(_invalid_raw("spec", "certificates.CertificateSigningRequestSpec{...}", _IMMUTABLE))
    return causes


# -- networking.k8s.io/v1 ---------------------------------------------------------------------

_POLICY_TYPES = ["Egress", "Ingress"]


def _valid_cidr(value: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        return False
    return True


def _validate_netpol_ports(ports: Any, path: str) -> Causes:
    causes: Causes = []
    for i, port in enumerate(_d(p) for p in _l(ports)):
        ppath = f"{path}[{i}]"
        proto = port.get("protocol")
        if proto is not None and proto not in _PORT_PROTOCOLS:
            causes.append(not_supported(f"{ppath}.protocol", proto, _PORT_PROTOCOLS))
        value = port.get("port")
        if isinstance(value, int) and not isinstance(value, bool):
            causes.extend(_invalid(f"{ppath}.port", value, m) for m in is_valid_port_num(value))
        elif isinstance(value, str):
            causes.extend(_invalid(f"{ppath}.port", value, m) for m in is_valid_port_name(value))
        end = _int(port.get("endPort"))
        if end is not None:
            if not isinstance(value, int):
                causes.append(required(f"{ppath}.port", "must be specified when endPort is specified"))
            elif end < value:
                causes.append(_invalid(f"{ppath}.endPort", end, "must be greater than or equal to `port`"))
    return causes


def _validate_netpol_peers(peers: Any, path: str) -> Causes:
    causes: Causes = []
    for i, peer in enumerate(_d(p) for p in _l(peers)):
        ppath = f"{path}[{i}]"
        present = [k for k in ("podSelector", "namespaceSelector", "ipBlock") if peer.get(k) is not None]
        if not present:
            causes.append(required(ppath, "must specify a peer"))
        elif "ipBlock" in present and len(present) > 1:
            causes.append(forbidden_field(ppath, "may not specify both ipBlock and another peer"))
        causes.extend(validate_label_selector(peer.get("podSelector"), f"{ppath}.podSelector"))
        causes.extend(validate_label_selector(peer.get("namespaceSelector"), f"{ppath}.namespaceSelector"))
        block = peer.get("ipBlock")
        if block is not None:
            cidr = _str(_d(block).get("cidr"))
            if not cidr:
                causes.append(required(f"{ppath}.ipBlock.cidr", ""))
            elif not _valid_cidr(cidr):
                causes.append(_invalid(f"{ppath}.ipBlock.cidr", cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 "
                                                                       "or 2001:db8::/64)"))
    return causes


def _validate_network_policy(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    causes.extend(validate_label_selector(spec.get("podSelector"), "spec.podSelector"))
    for i, rule in enumerate(_d(r) for r in _l(spec.get("ingress"))):
        causes.extend(_validate_netpol_ports(rule.get("ports"), f"spec.ingress[{i}].ports"))
        causes.extend(_validate_netpol_peers(rule.get("from"), f"spec.ingress[{i}].from"))
    for i, rule in enumerate(_d(r) for r in _l(spec.get("egress"))):
        causes.extend(_validate_netpol_ports(rule.get("ports"), f"spec.egress[{i}].ports"))
        causes.extend(_validate_netpol_peers(rule.get("to"), f"spec.egress[{i}].to"))
    types = _l(spec.get("policyTypes"))
    for i, ptype in enumerate(types):
        if ptype not in _POLICY_TYPES:
            causes.append(not_supported(f"spec.policyTypes[{i}]", ptype, _POLICY_TYPES))
    if len(types) > 2:
        causes.append(_invalid_raw("spec.policyTypes", "[]networking.PolicyType{...}",
                                   "may not specify more than two policyTypes"))
    return causes


_PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
_WILDCARD_DNS_RE = re.compile(r"\*\." + _DNS1123_SUBDOMAIN_FMT)


def _validate_ingress_backend(backend: Any, path: str) -> Causes:
    backend = _d(backend)
    service, resource = backend.get("service"), backend.get("resource")
    causes: Causes = []
    if service is not None and resource is not None:
        causes.append(_invalid_raw(path, "networking.IngressBackend{...}", "cannot set both resource and service "
                                                                           "backends"))
    elif service is None and resource is None:
        causes.append(_invalid_raw(path, "networking.IngressBackend{...}", "resource or service backend is "
                                                                           "required"))
    if service is not None:
        service = _d(service)
        name = _str(service.get("name"))
        if not name:
            causes.append(required(f"{path}.service.name", ""))
        else:
            causes.extend(_invalid(f"{path}.service.name", name, m) for m in name_is_dns1035_label(name, False))
        port = _d(service.get("port"))
        has_name, has_number = bool(_str(port.get("name"))), port.get("number") not in (None, 0)
        if has_name and has_number:
            causes.append(_invalid(f"{path}.service.port", "", "cannot specify both port name and port number"))
        elif not has_name and not has_number:
            causes.append(_invalid(f"{path}.service.port", "", "port name or number is required"))
        if has_number:
            causes.extend(_invalid(f"{path}.service.port.number", port["number"], m)
                          for m in is_valid_port_num(_int(port["number"]) or 0))
    if resource is not None:
        resource = _d(resource)
        if not _str(resource.get("kind")):
            causes.append(required(f"{path}.resource.kind", ""))
        if not _str(resource.get("name")):
            causes.append(required(f"{path}.resource.name", ""))
    return causes


def _validate_ingress(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    rules = _l(spec.get("rules"))
    if not rules and spec.get("defaultBackend") is None:
        causes.append(_invalid_raw("spec.rules", "[]networking.IngressRule(nil)",
                                   "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        causes.extend(_validate_ingress_backend(spec["defaultBackend"], "spec.defaultBackend"))
    for i, rule in enumerate(_d(r) for r in rules):
        rpath = f"spec.rules[{i}]"
        host = _str(rule.get("host"))
        if host:
            if "*" in host:
                if not _WILDCARD_DNS_RE.fullmatch(host):
                    causes.append(_invalid(f"{rpath}.host", host, "a wildcard DNS-1123 subdomain must start with "
                                                                  "'*.', followed by a valid DNS subdomain, which "
                                                                  "must consist of lower case alphanumeric characters, "
                                                                  "'-' or '.' and end with an alphanumeric character "
                                                                  "(e.g. '*.example.com', regex used for validation "
                                                                  "is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
                                                                  "([-a-z0-9]*[a-z0-9])?)*')"))
            else:
                causes.extend(_invalid(f"{rpath}.host", host, m) for m in is_dns1123_subdomain(host))
        http = rule.get("http")
        if http is None:
            continue
        paths = _l(_d(http).get("paths"))
        if not paths:
            causes.append(required(f"{rpath}.http.paths", ""))
        for j, hp in enumerate(_d(p) for p in paths):
            ppath = f"{rpath}.http.paths[{j}]"
            ptype = hp.get("pathType")
            if ptype is None:
                causes.append(required(f"{ppath}.pathType", "pathType must be specified"))
            elif ptype not in _PATH_TYPES:
                causes.append(not_supported(f"{ppath}.pathType", ptype, _PATH_TYPES))
            elif ptype in ("Exact", "Prefix") and not _str(hp.get("path")).startswith("/"):
                causes.append(_invalid(f"{ppath}.path", _str(hp.get("path")), "must be an absolute path"))
            causes.extend(_validate_ingress_backend(hp.get("backend"), f"{ppath}.backend"))
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        causes.extend(_invalid("spec.ingressClassName", class_name, m)
                      for m in name_is_dns_subdomain(_str(class_name), False))
    return causes


def _validate_ingress_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    controller = _str(spec.get("controller"))
    if not controller:
        causes.append(required("spec.controller", ""))
    elif len(controller) > 250:
        causes.append(too_long("spec.controller", 250))
    elif "/" not in controller or not controller.split("/")[0] or is_dns1123_subdomain(controller.split("/")[0]):
        causes.append(_invalid("spec.controller", controller, "must be a domain-prefixed path (such as "
                                                              "\"acme.io/foo\")"))
    if old is not None and spec.get("controller") != _d(old.get("spec")).get("controller"):
        causes.append(_invalid("spec.controller", controller, _IMMUTABLE))
    return causes


def _validate_service_cidr(obj: Obj, old: Obj | None) -> Causes:
    import ipaddress

    causes = validate_object_meta(obj)
    cidrs = _l(_d(obj.get("spec")).get("cidrs"))
    if not cidrs:
        causes.append(required("spec.cidrs", ""))
    elif len(cidrs) > 2:
        causes.append(_invalid_raw("spec", "[]string{...}", "may only hold up to 2 values"))
    families = []
    for i, cidr in enumerate(cidrs):
        try:
            net = ipaddress.ip_network(_str(cidr), strict=True)
            families.append(net.version)
        except ValueError:
            causes.append(_invalid(f"spec.cidrs[{i}]", cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                                             "2001:db8::/64)"))
    if len(families) == 2 and families[0] == families[1]:
        causes.append(_invalid_raw("spec.cidrs", "[]string{...}", "may specify no more than one IP for each IP "
                                                                  "family, i.e 192.168.0.0/24 and 2001:db8::/64"))
    if old is not None:
        old_cidrs = _l(_d(old.get("spec")).get("cidrs"))
        if cidrs[:len(old_cidrs)] != old_cidrs:
            causes.append(_invalid_raw("spec.cidrs", "[]string{...}", _IMMUTABLE))
    return causes


def _validate_ip_address(obj: Obj, old: Obj | None) -> Causes:
    import ipaddress

    causes = validate_object_meta(obj, name_fn=lambda name, prefix: [])
    name = _str(_d(obj.get("metadata")).get("name"))
    if name:
        try:
            if str(ipaddress.ip_address(name)) != name:
                causes.append(_invalid("metadata.name", name, f"must be in canonical form "
                                                              f"(\"{ipaddress.ip_address(name)}\")"))
        except ValueError:
            causes.append(_invalid("metadata.name", name,
                                   "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
    ref = _d(obj.get("spec")).get("parentRef")
    if ref is None:
        causes.append(required("spec.parentRef", ""))
    else:
        for part in ("resource", "name"):
            if not _str(_d(ref).get(part)):
                causes.append(required(f"spec.parentRef.{part}", ""))
    if old is not None and _semantic(ref) != _semantic(_d(old.get("spec")).get("parentRef")):
        causes.append(_invalid_raw("spec.parentRef", "networking.ParentReference{...}", _IMMUTABLE))
    return causes


# -- node.k8s.io/v1 ---------------------------------------------------------------------------


def _validate_runtime_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    handler = _str(obj.get("handler"))
    causes.extend(_invalid("handler", handler, m) for m in name_is_dns_label(handler, False))
    overhead = _d(_d(obj.get("overhead")).get("podFixed"))
    causes.extend(_validate_resource_list(overhead, "overhead.podFixed"))
    scheduling = _d(obj.get("scheduling"))
    causes.extend(validate_labels(scheduling.get("nodeSelector"), "scheduling.nodeSelector"))
    causes.extend(validate_tolerations(scheduling.get("tolerations"), "scheduling.tolerations"))
    if old is not None and obj.get("handler") != old.get("handler"):
        causes.append(_invalid("handler", handler, _IMMUTABLE))
    return causes


# -- admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy(Binding) -------------------------

_FAILURE_POLICIES = ["Fail", "Ignore"]
_VALIDATION_ACTIONS = ["Audit", "Deny", "Warn"]


def _validate_match_resources(match: Any, path: str, require_rules: bool) -> Causes:
    match = _d(match)
    causes: Causes = []
    rules = _l(match.get("resourceRules"))
    if require_rules and not rules:
        causes.append(required(f"{path}.resourceRules", ""))
    for i, rule in enumerate(_d(r) for r in rules):
        causes.extend(_validate_webhook_rule(rule, f"{path}.resourceRules[{i}]"))
    for i, rule in enumerate(_d(r) for r in _l(match.get("excludeResourceRules"))):
        causes.extend(_validate_webhook_rule(rule, f"{path}.excludeResourceRules[{i}]"))
    policy = match.get("matchPolicy")
    if policy is not None and policy not in ("Equivalent", "Exact"):
        causes.append(not_supported(f"{path}.matchPolicy", policy, ["Equivalent", "Exact"]))
    causes.extend(validate_label_selector(match.get("namespaceSelector"), f"{path}.namespaceSelector"))
    causes.extend(validate_label_selector(match.get("objectSelector"), f"{path}.objectSelector"))
    return causes


def _validate_admission_policy(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    if not _l(spec.get("validations")) and not _l(spec.get("auditAnnotations")):
        causes.append(required("spec.validations", "validations or auditAnnotations must contain at least one item"))
    for i, rule in enumerate(_d(v) for v in _l(spec.get("validations"))):
        if not _str(rule.get("expression")):
            causes.append(required(f"spec.validations[{i}].expression", ""))
    policy = spec.get("failurePolicy")
    if policy is not None and policy not in _FAILURE_POLICIES:
        causes.append(not_supported("spec.failurePolicy", policy, _FAILURE_POLICIES))
    if spec.get("matchConstraints") is None:
        causes.append(required("spec.matchConstraints", ""))
    else:
        causes.extend(_validate_match_resources(spec["matchConstraints"], "spec.matchConstraints", True))
    param = spec.get("paramKind")
    if param is not None:
        for part in ("apiVersion", "kind"):
            if not _str(_d(param).get(part)):
                causes.append(required(f"spec.paramKind.{part}", ""))
    return causes


def _validate_admission_policy_binding(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = _d(obj.get("spec"))
    if not _str(spec.get("policyName")):
        causes.append(required("spec.policyName", ""))
    actions = _l(spec.get("validationActions"))
    if not actions:
        causes.append(required("spec.validationActions", "at least one validation action is required"))
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in _VALIDATION_ACTIONS:
            causes.append(not_supported(f"spec.validationActions[{i}]", action, _VALIDATION_ACTIONS))
        if action in seen:
            causes.append(duplicate(f"spec.validationActions[{i}]", action))
        seen.add(action)
    if "Deny" in seen and "Warn" in seen:
        causes.append(_invalid_raw("spec.validationActions", "[]admissionregistration.ValidationAction{...}",
                                   "must not contain both Deny and Warn (repeating the same validation failure "
                                   "information in the API response and headers serves no purpose)"))
    if spec.get("matchResources") is not None:
        causes.extend(_validate_match_resources(spec["matchResources"], "spec.matchResources", False))
    return causes


Validator = Callable[[Obj, "Obj | None"], Causes]

VALIDATORS: dict[tuple[str, str], Validator] = {
    ("", "Pod"): _validate_pod,
    ("", "Node"): _validate_node,
    ("", "Namespace"): _validate_namespace,
    ("", "ConfigMap"): _validate_configmap,
    ("", "Secret"): _validate_secret,
    ("", "Service"): _validate_service,
    ("", "ServiceAccount"): _validate_service_account,
    ("", "Endpoints"): _validate_core_generic,
    ("", "Event"): _validate_event,
    ("apps", "Deployment"): _validate_deployment,
    ("apps", "DaemonSet"): _validate_daemonset,
    ("apps", "ReplicaSet"): _validate_replicaset,
    ("apps", "StatefulSet"): _validate_statefulset,
    ("batch", "Job"): _validate_job,
    ("batch", "CronJob"): _validate_cronjob,
    ("scheduling.k8s.io", "PriorityClass"): _validate_priority_class,
    ("coordination.k8s.io", "Lease"): _validate_lease,
    ("policy", "PodDisruptionBudget"): _validate_pdb,
    ("rbac.authorization.k8s.io", "Role"): _validate_role,
    ("rbac.authorization.k8s.io", "ClusterRole"): _validate_cluster_role,
    ("rbac.authorization.k8s.io", "RoleBinding"): _validate_role_binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): _validate_cluster_role_binding,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _validate_core_generic,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): _validate_mutating_webhooks,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): _validate_validating_webhooks,
    ("", "PersistentVolume"): _validate_persistent_volume,
    ("", "PersistentVolumeClaim"): _validate_pvc,
    ("", "ReplicationController"): _validate_replication_controller,
    ("", "PodTemplate"): _validate_pod_template_kind,
    ("", "ResourceQuota"): _validate_resource_quota,
    ("", "LimitRange"): _validate_limit_range,
    ("apps", "ControllerRevision"): _validate_controller_revision,
    ("storage.k8s.io", "StorageClass"): _validate_storage_class,
    ("storage.k8s.io", "CSIDriver"): _validate_csi_driver,
    ("storage.k8s.io", "CSINode"): _validate_csi_node,
    ("storage.k8s.io", "CSIStorageCapacity"): _validate_csi_storage_capacity,
    ("storage.k8s.io", "VolumeAttachment"): _validate_volume_attachment,
    ("storage.k8s.io", "VolumeAttributesClass"): _validate_volume_attributes_class,
    ("resource.k8s.io", "DeviceClass"): _validate_device_class,
    ("resource.k8s.io", "ResourceSlice"): _validate_resource_slice,
    ("resource.k8s.io", "ResourceClaim"): _validate_resource_claim,
    ("resource.k8s.io", "ResourceClaimTemplate"): _validate_resource_claim_template,
    ("events.k8s.io", "Event"): _validate_events_v1,
    ("discovery.k8s.io", "EndpointSlice"): _validate_endpoint_slice,
    ("autoscaling", "HorizontalPodAutoscaler"): _validate_hpa,
    ("certificates.k8s.io", "CertificateSigningRequest"): _validate_csr,
    ("networking.k8s.io", "NetworkPolicy"): _validate_network_policy,
    ("networking.k8s.io", "Ingress"): _validate_ingress,
    ("networking.k8s.io", "IngressClass"): _validate_ingress_class,
    ("networking.k8s.io", "ServiceCIDR"): _validate_service_cidr,
    ("networking.k8s.io", "IPAddress"): _validate_ip_address,
    ("node.k8s.io", "RuntimeClass"): _validate_runtime_class,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): _validate_admission_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): _validate_admission_policy_binding,
}

# Create-only virtual kinds: never stored, so the server does not validate their metadata.
_UNVALIDATED_KINDS = frozenset({
    "TokenReview", "SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview",
    "SelfSubjectRulesReview", "SelfSubjectReview", "Binding", "Eviction", "Scale", "DeleteOptions", "Status",
})


def validate(group: str, kind: str, obj: Obj, old: Obj | None = None) -> Causes:
    """All validation causes for ``obj`` (an update when ``old`` is given), deduplicated.

    Kinds without a specific validator, custom resources included, get ObjectMeta
    validation. Identical causes are reported once, as the server's aggregate message does.
    """
    if kind in _UNVALIDATED_KINDS:
        return []
    validator = VALIDATORS.get((group, kind), _validate_generic)
    causes = validator(obj, old)
    if len(causes) < 2:
        return causes
    seen: set[tuple[str, str]] = set()
    unique: Causes = []
    for c in causes:
        key = (c["field"], c["message"])
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique
