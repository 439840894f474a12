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
