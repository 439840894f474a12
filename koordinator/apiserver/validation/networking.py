"""networking.k8s.io/v1: NetworkPolicy, Ingress, IngressClass, ServiceCIDR, IPAddress."""

from __future__ import annotations

import re
from typing import Any

from koordinator.apiserver.errors import forbidden_field, not_supported, required, too_long
from koordinator.apiserver.validation.causes import (
    IMMUTABLE,
    Causes,
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    invalid,
    invalid_rendered,
)
from koordinator.apiserver.validation.core_resources import semantic
from koordinator.apiserver.validation.formats import (
    DNS1123_SUBDOMAIN_FMT,
    is_dns1123_subdomain,
    is_valid_port_name,
    is_valid_port_num,
    name_is_dns1035_label,
    name_is_dns_subdomain,
)
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import PORT_PROTOCOLS, validate_label_selector


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
    for i, port in enumerate(as_dict(p) for p in as_list(ports)):
        ppath = f"{path}[{i}]"
        proto = port.get("protocol")
        if proto is not None and proto not in PORT_PROTOCOLS:
            causes.append(not_supported(f"{ppath}.protocol", proto, PORT_PROTOCOLS))
        value = port.get("port")
        if isinstance(value, int) and not isinstance(value, bool):
            causes.extend(invalid(f"{ppath}.port", value, m) for m in is_valid_port_num(value))
        elif isinstance(value, str):
            causes.extend(invalid(f"{ppath}.port", value, m) for m in is_valid_port_name(value))
        end = as_int(port.get("endPort"))
        if end is not None:
            if not isinstance(value, int):
                causes.append(required(f"{ppath}.port", "must be specified when endPort is specified"))
            elif end < value:
                causes.append(invalid(f"{ppath}.endPort", end, "must be greater than or equal to `port`"))
    return causes


def _validate_netpol_peers(peers: Any, path: str) -> Causes:
    causes: Causes = []
    for i, peer in enumerate(as_dict(p) for p in as_list(peers)):
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
            cidr = as_str(as_dict(block).get("cidr"))
            if not cidr:
                causes.append(required(f"{ppath}.ipBlock.cidr", ""))
            elif not _valid_cidr(cidr):
                causes.append(invalid(f"{ppath}.ipBlock.cidr", cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 "
                                                                       "or 2001:db8::/64)"))
    return causes


def validate_network_policy(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(validate_label_selector(spec.get("podSelector"), "spec.podSelector"))
    for i, rule in enumerate(as_dict(r) for r in as_list(spec.get("ingress"))):
        causes.extend(_validate_netpol_ports(rule.get("ports"), f"spec.ingress[{i}].ports"))
        causes.extend(_validate_netpol_peers(rule.get("from"), f"spec.ingress[{i}].from"))
    for i, rule in enumerate(as_dict(r) for r in as_list(spec.get("egress"))):
        causes.extend(_validate_netpol_ports(rule.get("ports"), f"spec.egress[{i}].ports"))
        causes.extend(_validate_netpol_peers(rule.get("to"), f"spec.egress[{i}].to"))
    types = as_list(spec.get("policyTypes"))
    for i, ptype in enumerate(types):
        if ptype not in _POLICY_TYPES:
            causes.append(not_supported(f"spec.policyTypes[{i}]", ptype, _POLICY_TYPES))
    if len(types) > 2:
        causes.append(invalid_rendered("spec.policyTypes", "[]networking.PolicyType{...}",
                                       "may not specify more than two policyTypes"))
    return causes


_PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
_WILDCARD_DNS_RE = re.compile(r"\*\." + DNS1123_SUBDOMAIN_FMT)


def _validate_ingress_backend(backend: Any, path: str) -> Causes:
    backend = as_dict(backend)
    service, resource = backend.get("service"), backend.get("resource")
    causes: Causes = []
    if service is not None and resource is not None:
        causes.append(invalid_rendered(path, "networking.IngressBackend{...}", "cannot set both resource and service "
                                                                           "backends"))
    elif service is None and resource is None:
        causes.append(invalid_rendered(path, "networking.IngressBackend{...}", "resource or service backend is "
                                                                           "required"))
    if service is not None:
        service = as_dict(service)
        name = as_str(service.get("name"))
        if not name:
            causes.append(required(f"{path}.service.name", ""))
        else:
            causes.extend(invalid(f"{path}.service.name", name, m) for m in name_is_dns1035_label(name, False))
        port = as_dict(service.get("port"))
        has_name, has_number = bool(as_str(port.get("name"))), port.get("number") not in (None, 0)
        if has_name and has_number:
            causes.append(invalid(f"{path}.service.port", "", "cannot specify both port name and port number"))
        elif not has_name and not has_number:
            causes.append(invalid(f"{path}.service.port", "", "port name or number is required"))
        if has_number:
            causes.extend(invalid(f"{path}.service.port.number", port["number"], m)
                          for m in is_valid_port_num(as_int(port["number"]) or 0))
    if resource is not None:
        resource = as_dict(resource)
        if not as_str(resource.get("kind")):
            causes.append(required(f"{path}.resource.kind", ""))
        if not as_str(resource.get("name")):
            causes.append(required(f"{path}.resource.name", ""))
    return causes


def validate_ingress(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    rules = as_list(spec.get("rules"))
    if not rules and spec.get("defaultBackend") is None:
        causes.append(invalid_rendered("spec.rules", "[]networking.IngressRule(nil)",
                                       "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        causes.extend(_validate_ingress_backend(spec["defaultBackend"], "spec.defaultBackend"))
    for i, rule in enumerate(as_dict(r) for r in rules):
        rpath = f"spec.rules[{i}]"
        host = as_str(rule.get("host"))
        if host:
            if "*" in host:
                if not _WILDCARD_DNS_RE.fullmatch(host):
                    causes.append(invalid(f"{rpath}.host", host, "a wildcard DNS-1123 subdomain must start with "
                                                                  "'*.', followed by a valid DNS subdomain, which "
                                                                  "must consist of lower case alphanumeric characters, "
                                                                  "'-' or '.' and end with an alphanumeric character "
                                                                  "(e.g. '*.example.com', regex used for validation "
                                                                  "is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]"
                                                                  "([-a-z0-9]*[a-z0-9])?)*')"))
            else:
                causes.extend(invalid(f"{rpath}.host", host, m) for m in is_dns1123_subdomain(host))
        http = rule.get("http")
        if http is None:
            continue
        paths = as_list(as_dict(http).get("paths"))
        if not paths:
            causes.append(required(f"{rpath}.http.paths", ""))
        for j, hp in enumerate(as_dict(p) for p in paths):
            ppath = f"{rpath}.http.paths[{j}]"
            ptype = hp.get("pathType")
            if ptype is None:
                causes.append(required(f"{ppath}.pathType", "pathType must be specified"))
            elif ptype not in _PATH_TYPES:
                causes.append(not_supported(f"{ppath}.pathType", ptype, _PATH_TYPES))
            elif ptype in ("Exact", "Prefix") and not as_str(hp.get("path")).startswith("/"):
                causes.append(invalid(f"{ppath}.path", as_str(hp.get("path")), "must be an absolute path"))
            causes.extend(_validate_ingress_backend(hp.get("backend"), f"{ppath}.backend"))
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        causes.extend(invalid("spec.ingressClassName", class_name, m)
                      for m in name_is_dns_subdomain(as_str(class_name), False))
    return causes


def validate_ingress_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    controller = as_str(spec.get("controller"))
    if not controller:
        causes.append(required("spec.controller", ""))
    elif len(controller) > 250:
        causes.append(too_long("spec.controller", 250))
    elif "/" not in controller or not controller.split("/")[0] or is_dns1123_subdomain(controller.split("/")[0]):
        causes.append(invalid("spec.controller", controller, "must be a domain-prefixed path (such as "
                                                              "\"acme.io/foo\")"))
    if old is not None and spec.get("controller") != as_dict(old.get("spec")).get("controller"):
        causes.append(invalid("spec.controller", controller, IMMUTABLE))
    return causes


def validate_service_cidr(obj: Obj, old: Obj | None) -> Causes:
    import ipaddress

    causes = validate_object_meta(obj)
    cidrs = as_list(as_dict(obj.get("spec")).get("cidrs"))
    if not cidrs:
        causes.append(required("spec.cidrs", ""))
    elif len(cidrs) > 2:
        causes.append(invalid_rendered("spec", "[]string{...}", "may only hold up to 2 values"))
    families = []
    for i, cidr in enumerate(cidrs):
        try:
            net = ipaddress.ip_network(as_str(cidr), strict=True)
            families.append(net.version)
        except ValueError:
            causes.append(invalid(f"spec.cidrs[{i}]", cidr, "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                                             "2001:db8::/64)"))
    if len(families) == 2 and families[0] == families[1]:
        causes.append(invalid_rendered("spec.cidrs", "[]string{...}", "may specify no more than one IP for each IP "
                                                                  "family, i.e 192.168.0.0/24 and 2001:db8::/64"))
    if old is not None:
        old_cidrs = as_list(as_dict(old.get("spec")).get("cidrs"))
        if cidrs[:len(old_cidrs)] != old_cidrs:
            causes.append(invalid_rendered("spec.cidrs", "[]string{...}", IMMUTABLE))
    return causes


def validate_ip_address(obj: Obj, old: Obj | None) -> Causes:
    import ipaddress

    causes = validate_object_meta(obj, name_fn=lambda name, prefix: [])
    name = as_str(as_dict(obj.get("metadata")).get("name"))
    if name:
        try:
            if str(ipaddress.ip_address(name)) != name:
                causes.append(invalid("metadata.name", name, f"must be in canonical form "
                                                              f"(\"{ipaddress.ip_address(name)}\")"))
        except ValueError:
            causes.append(invalid("metadata.name", name,
                                  "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
    ref = as_dict(obj.get("spec")).get("parentRef")
    if ref is None:
        causes.append(required("spec.parentRef", ""))
    else:
        for part in ("resource", "name"):
            if not as_str(as_dict(ref).get(part)):
                causes.append(required(f"spec.parentRef.{part}", ""))
    if old is not None and semantic(ref) != semantic(as_dict(old.get("spec")).get("parentRef")):
        causes.append(invalid_rendered("spec.parentRef", "networking.ParentReference{...}", IMMUTABLE))
    return causes
