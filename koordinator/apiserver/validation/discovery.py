"""discovery.k8s.io/v1: EndpointSlice."""

from __future__ import annotations

from koordinator.apiserver.errors import cause, duplicate, not_supported, required
from koordinator.apiserver.validation.causes import IMMUTABLE, Causes, Obj, as_dict, as_int, as_list, as_str, invalid
from koordinator.apiserver.validation.formats import is_dns1123_label, is_valid_port_num, name_is_dns_subdomain
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import PORT_PROTOCOLS


# -- discovery.k8s.io/v1 ----------------------------------------------------------------------

_ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]


def validate_endpoint_slice(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    address_type = as_str(obj.get("addressType"))
    if address_type not in _ADDRESS_TYPES:
        causes.append(not_supported("addressType", address_type, _ADDRESS_TYPES))
    endpoints = as_list(obj.get("endpoints"))
    if len(endpoints) > 1000:
        causes.append(cause("FieldValueTooMany", "endpoints", f"Too many: {len(endpoints)}: must have at most 1000 "
                                                              "items"))
    for i, ep in enumerate(as_dict(e) for e in endpoints):
        addresses = as_list(ep.get("addresses"))
        if not addresses:
            causes.append(required(f"endpoints[{i}].addresses", "must contain at least 1 address"))
        elif len(addresses) > 100:
            causes.append(cause("FieldValueTooMany", f"endpoints[{i}].addresses",
                                f"Too many: {len(addresses)}: must have at most 100 items"))
        if as_str(ep.get("nodeName")):
            causes.extend(invalid(f"endpoints[{i}].nodeName", ep["nodeName"], m)
                          for m in name_is_dns_subdomain(ep["nodeName"], False))
        if as_str(ep.get("hostname")):
            causes.extend(invalid(f"endpoints[{i}].hostname", ep["hostname"], m)
                          for m in is_dns1123_label(ep["hostname"]))
    names: set[str] = set()
    for i, port in enumerate(as_dict(p) for p in as_list(obj.get("ports"))):
        name = as_str(port.get("name"))
        if name:
            causes.extend(invalid(f"ports[{i}].name", name, m) for m in is_dns1123_label(name))
        if name in names:
            causes.append(duplicate(f"ports[{i}].name", name))
        names.add(name)
        if port.get("protocol") is not None and port["protocol"] not in PORT_PROTOCOLS:
            causes.append(not_supported(f"ports[{i}].protocol", port["protocol"], PORT_PROTOCOLS))
        number = as_int(port.get("port"))
        if number is not None:
            causes.extend(invalid(f"ports[{i}].port", number, m) for m in is_valid_port_num(number))
    if old is not None and obj.get("addressType") != old.get("addressType"):
        causes.append(invalid("addressType", obj.get("addressType"), IMMUTABLE))
    return causes
