"""Decoding of ``application/vnd.kubernetes.protobuf`` request bodies into plain JSON-shaped dicts.

client-go's typed clients (the ``kubectl create <generator>`` commands, for one) send the
built-in kinds in Kubernetes protobuf. The body is the 4-byte magic ``k8s\\x00`` followed by a
``runtime.Unknown`` envelope: {1 typeMeta {1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding,
4 contentType}; ``raw`` is the object's own message. The result is the dict that the JSON encoding
of the same Go object would have produced, so the rest of the server never sees the difference.
Field tables live in ``protobuf_schema``; fields it does not list are skipped (the real server's
protobuf decoder drops unknown fields silently as well). Responses stay JSON: clients accept it.
"""

from __future__ import annotations

import base64
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import orjson

from koordinator.apiserver import errors
from koordinator.apiserver.protobuf_schema import MESSAGES, Field, message_for

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# Wire types.
VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class MalformedBody(ValueError):
    """The bytes are not a well-formed message of the expected shape."""


def decode(body: bytes, kind: str | None = None, version: str | None = None) -> dict[str, Any]:
    """Decode a protobuf request body into the JSON-shaped object it carries.

    ``kind``/``version`` name the resource the request was sent to, only to word errors the way
    the JSON path does. Raises a 400 StatusError for malformed input and a 415 one for a kind
    this server has no protobuf schema for.
    """
    obj, unknown = decode_reporting(body, kind, version)
    if unknown:
        # The real server's protobuf decoder drops unknown fields silently (fieldValidation only
        # applies to JSON and YAML); a debug line keeps them findable.
        log.debug("protobuf %s %s: skipped unknown fields %s", obj["apiVersion"], obj["kind"], ", ".join(unknown))
    return obj


def decode_reporting(body: bytes, kind: str | None = None,
                     version: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """Like ``decode``, also returning the paths of the fields that were skipped as unknown."""
    try:
        api_version, obj_kind, raw = _unwrap(bytes(body))
    except MalformedBody as exc:
        raise _bad(str(exc), kind, version) from None
    message = message_for(api_version, obj_kind)
    if message is None:
        base = errors.unsupported_media_type(MEDIA_TYPE)
        raise errors.StatusError(base.code, base.reason, f'{obj_kind or "an object without a kind"} in version '
                                 f'"{api_version}" cannot be sent as {MEDIA_TYPE} here; {base.message}')
    unknown: list[str] = []
    try:
        fields = decode_message(raw, message, unknown)
    except MalformedBody as exc:
        raise _bad(str(exc), kind or obj_kind, version or api_version) from None
    return {"kind": obj_kind, "apiVersion": api_version, **fields}, unknown


def _bad(detail: str, kind: str | None, version: str | None) -> errors.StatusError:
    if kind:
        return errors.cannot_handle(kind, version or "", f"protobuf: {detail}")
    return errors.bad_request(f"the request body could not be decoded: protobuf: {detail}")


def _unwrap(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw) from the magic-prefixed runtime.Unknown envelope."""
    if not body.startswith(MAGIC):
        raise MalformedBody("the body does not start with the Kubernetes protobuf magic number")
    api_version = kind = encoding = content_type = ""
    raw = b""
    for num, wire, value in _fields(body, len(MAGIC), len(body), "envelope"):
        if num == 1 and wire == LENGTH:
            for n, w, v in _fields(value, 0, len(value), "envelope.typeMeta"):
                if n == 1 and w == LENGTH:
                    api_version = _text(v)
                elif n == 2 and w == LENGTH:
                    kind = _text(v)
        elif num == 2 and wire == LENGTH:
            raw = value
        elif num == 3 and wire == LENGTH:
            encoding = _text(value)
        elif num == 4 and wire == LENGTH:
            content_type = _text(value)
    if encoding:
        raise MalformedBody(f"unsupported content encoding {encoding!r}")
    if content_type and content_type != MEDIA_TYPE:
        raise MalformedBody(f"unsupported content type {content_type!r} inside the envelope")
    if not kind:
        raise MalformedBody("the envelope names no kind")
    return api_version, kind, raw


# -- wire format ----------------------------------------------------------------------------------

def _varint(data: bytes, pos: int, end: int, path: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise MalformedBody(f"truncated varint at {path}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise MalformedBody(f"varint longer than 10 bytes at {path}")


def _fields(data: bytes, pos: int, end: int, path: str):
    """Yield (field number, wire type, value) for each field in data[pos:end].

    The value is an int for varints and fixed-width fields, bytes for length-delimited ones.
    """
    while pos < end:
        key, pos = _varint(data, pos, end, path)
        num, wire = key >> 3, key & 7
        if num == 0:
            raise MalformedBody(f"field number 0 at {path}")
        if wire == VARINT:
            value, pos = _varint(data, pos, end, f"{path}#{num}")
        elif wire == LENGTH:
            size, pos = _varint(data, pos, end, f"{path}#{num}")
            if size > end - pos:
                raise MalformedBody(f"length {size} of field {num} runs past the end of {path}")
            value, pos = data[pos:pos + size], pos + size
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            if width > end - pos:
                raise MalformedBody(f"truncated fixed-width field {num} at {path}")
            value, pos = int.from_bytes(data[pos:pos + width], "little"), pos + width
        else:
            # Groups (3, 4) are not used by any Kubernetes type; 6 and 7 are not wire types at all.
            raise MalformedBody(f"unsupported wire type {wire} for field {num} at {path}")
        yield num, wire, value


def _text(value: bytes) -> str:
    # Go strings may hold any bytes; its JSON encoder writes invalid UTF-8 as U+FFFD, as here.
    return value.decode("utf-8", errors="replace")


def _signed(value: int) -> int:
    # int32/int64 are two's complement in a 64-bit varint (negative int32s are sign-extended too).
    return value - (1 << 64) if value >= 1 << 63 else value


# -- messages -------------------------------------------------------------------------------------

def decode_message(data: bytes, message: str, unknown: list[str] | None = None, path: str = "") -> dict[str, Any]:
    """Decode one message by its ``protobuf_schema`` name into a JSON-shaped dict.

    Unknown field numbers are skipped and their paths appended to ``unknown``.
    """
    schema = MESSAGES[message]
    values: dict[int, Any] = {}
    for num, wire, raw in _fields(data, 0, len(data), path or message):
        field = schema.get(num)
        if field is None:
            if unknown is not None:
                unknown.append(f"{path}#{num}" if path else f"#{num}")
            continue
        # An inline (embedded) struct's fields sit in the parent, so its path is the parent's.
        where = path if field.inline else f"{path}.{field.name}" if path else field.name
        if field.map_value:
            key, value = _map_entry(raw, wire, field, unknown, where)
            values.setdefault(num, {})[key] = value
        elif field.repeated:
            values.setdefault(num, []).extend(_repeated(raw, wire, field, unknown, where))
        else:
            # Proto semantics: the last occurrence of a singular field wins.
            values[num] = _value(raw, wire, field.type, unknown, where)
    out: dict[str, Any] = {}
    for num, field in schema.items():  # the schema's (Go struct) order, not the wire order
        if num not in values:
            continue
        value = values[num]
        if field.inline:
            out.update(value)
        elif value is _OMIT or value is None:
            continue
        elif not value and field.type in _OMITEMPTY and not (field.keep_zero or field.repeated or field.map_value):
            continue
        else:
            out[field.name] = value
    return out


_OMIT = object()  # a zero metav1.Time: Go's JSON writes null or nothing for it

# Only plain scalars lose their zero value. Everything struct-like (messages, Quantity,
# IntOrString) is kept even when empty, because Go's JSON writes non-pointer structs regardless
# of omitempty and the marshaller writes pointer ones only when they are set.
_OMITEMPTY = {"s", "i", "b", "y"}


def _value(raw: Any, wire: int, type_: str, unknown: list[str] | None, path: str) -> Any:
    if type_ in ("i", "b"):
        if wire != VARINT:
            raise MalformedBody(f"{path}: expected a varint, got wire type {wire}")
        return bool(raw) if type_ == "b" else _signed(raw)
    if wire != LENGTH:
        raise MalformedBody(f"{path}: expected a length-delimited value, got wire type {wire}")
    if type_ == "s":
        return _text(raw)
    if type_ == "y":
        return base64.b64encode(raw).decode()
    if type_ in ("t", "mt"):
        return _time(raw, micro=type_ == "mt", path=path)
    if type_ == "q":
        # resource.Quantity {1 string}; an unset one is the zero quantity, "0" in JSON.
        return _text(_known(raw, path, {1: LENGTH}).get(1, b"")) or "0"
    if type_ == "ios":
        return _int_or_string(raw, path)
    if type_ == "dur":
        # metav1.Duration {1 int64 nanoseconds}.
        return go_duration(_signed(_known(raw, path, {1: VARINT}).get(1, 0)))
    if type_ == "raw":
        return _raw_extension(raw, path)
    return decode_message(raw, type_, unknown, path)


def _repeated(raw: Any, wire: int, field: Field, unknown: list[str] | None, path: str) -> list[Any]:
    if field.type in ("i", "b") and wire == LENGTH:
        # A packed run of varints (proto2 k8s types write them unpacked, but both are valid).
        out, pos = [], 0
        while pos < len(raw):
            value, pos = _varint(raw, pos, len(raw), path)
            out.append(bool(value) if field.type == "b" else _signed(value))
        return out
    value = _value(raw, wire, field.type, unknown, path)
    return [None if value is _OMIT else value]


def _map_entry(raw: Any, wire: int, field: Field, unknown: list[str] | None, path: str) -> tuple[str, Any]:
    if wire != LENGTH:
        raise MalformedBody(f"{path}: expected a map entry, got wire type {wire}")
    key, value = "", None
    for num, w, v in _fields(raw, 0, len(raw), path):
        if num == 1:
            if w != LENGTH:
                raise MalformedBody(f"{path}: map key is not a string")
            key = _text(v)
        elif num == 2:
            value = _value(v, w, field.type, unknown, f"{path}[{key}]")
    if value is None:
        # An entry without a value holds the type's zero value.
        value = _value(b"", LENGTH, field.type, unknown, path) if field.type not in ("i", "b") else 0
    return key, (None if value is _OMIT else value)


def _known(raw: bytes, path: str, expect: dict[int, int]) -> dict[int, Any]:
    """The fields of a small well-known message that ``expect`` lists ({number: wire type})."""
    out = {}
    for num, wire, value in _fields(raw, 0, len(raw), path):
        if num in expect:
            if wire != expect[num]:
                raise MalformedBody(f"{path}: field {num} has wire type {wire}, expected {expect[num]}")
            out[num] = value
    return out


def _time(raw: bytes, micro: bool, path: str) -> Any:
    """metav1.Time / MicroTime {1 int64 seconds, 2 int32 nanos}; an empty message is the zero time."""
    if not raw:
        return _OMIT
    parts = _known(raw, path, {1: VARINT, 2: VARINT})
    seconds, nanos = _signed(parts.get(1, 0)), _signed(parts.get(2, 0))
    try:
        when = _EPOCH + timedelta(seconds=seconds)
    except OverflowError:
        raise MalformedBody(f"{path}: time out of range") from None
    if not 1 <= when.year <= 9999 or not 0 <= nanos < 10**9:
        raise MalformedBody(f"{path}: time out of range")
    if micro:
        return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int_or_string(raw: bytes, path: str) -> int | str:
    """intstr.IntOrString {1 type (0 int, 1 string), 2 intVal, 3 strVal} -> what its JSON holds."""
    parts = _known(raw, path, {1: VARINT, 2: VARINT, 3: LENGTH})
    if _signed(parts.get(1, 0)) == 1:
        return _text(parts.get(3, b""))
    int_val = _signed(parts.get(2, 0))
    if not -(1 << 31) <= int_val < 1 << 31:
        raise MalformedBody(f"{path}: intVal out of int32 range")
    return int_val


def _raw_extension(raw: bytes, path: str) -> Any:
    """runtime.RawExtension {1 raw}: the raw bytes are the JSON of the embedded object."""
    data = _known(raw, path, {1: LENGTH}).get(1, b"")
    if not data:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise MalformedBody(f"{path}: the embedded object is not JSON") from None


def go_duration(ns: int) -> str:
    """Format nanoseconds the way Go's time.Duration.String does ("1h2m3.5s", "250ms", "0s")."""
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1000:
        return f"{sign}{ns}ns"
    if ns < 10**6:
        return f"{sign}{_decimal(ns, 3)}µs"
    if ns < 10**9:
        return f"{sign}{_decimal(ns, 6)}ms"
    secs, frac = divmod(ns, 10**9)
    hours, rest = divmod(secs, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs}{_fraction(frac, 9)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _decimal(value: int, digits: int) -> str:
    whole, frac = divmod(value, 10**digits)
    return f"{whole}{_fraction(frac, digits)}"


def _fraction(frac: int, digits: int) -> str:
    return "." + f"{frac:0{digits}d}".rstrip("0") if frac else ""
