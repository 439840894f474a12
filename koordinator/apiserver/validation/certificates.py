"""certificates.k8s.io/v1: CertificateSigningRequest."""

from __future__ import annotations

import re

from koordinator.apiserver.errors import duplicate, not_supported, required
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
from koordinator.apiserver.validation.formats import is_dns1123_subdomain
from koordinator.apiserver.validation.meta import validate_object_meta


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
        return [invalid(path, name, "must be a fully qualified domain and path of the form "
                                     "'example.com/signer-name'")]
    causes = [invalid(path, name, m) for m in is_dns1123_subdomain(domain)]
    return causes


def validate_csr(obj: Obj, old: Obj | None) -> Causes:
    import base64 as _b64

    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    raw = spec.get("request")
    try:
        decoded = _b64.b64decode(as_str(raw), validate=True).decode("ascii", "replace") if raw else ""
    except ValueError:
        decoded = ""
    if not _PEM_CSR_RE.search(decoded):
        causes.append(invalid_rendered("spec.request", "[]byte{...}" if raw else "[]byte(nil)",
                                       "PEM block type must be CERTIFICATE REQUEST"))
    causes.extend(_validate_signer_name(as_str(spec.get("signerName")), "spec.signerName"))
    usages = as_list(spec.get("usages"))
    if not usages:
        causes.append(required("spec.usages", ""))
    for i, usage in enumerate(usages):
        if usage not in _KEY_USAGES:
            causes.append(not_supported(f"spec.usages[{i}]", usage, _KEY_USAGES))
    seconds = as_int(spec.get("expirationSeconds"))
    if seconds is not None and seconds < 600:
        causes.append(invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 600 seconds "
                                                                  "(10 minutes)"))
    types: set[str] = set()
    for i, cond in enumerate(as_dict(c) for c in as_list(as_dict(obj.get("status")).get("conditions"))):
        ctype = as_str(cond.get("type"))
        if not ctype:
            causes.append(required(f"status.conditions[{i}].type", ""))
        elif ctype in ("Approved", "Denied", "Failed") and ctype in types:
            causes.append(duplicate(f"status.conditions[{i}].type", ctype))
        types.add(ctype)
    if "Approved" in types and "Denied" in types:
        causes.append(invalid("status.conditions", "Approved",
                              "Approved and Denied conditions are mutually exclusive"))
    if old is not None and semantic(spec) != semantic(as_dict(old.get("spec"))):
        causes.append(invalid_rendered("spec", "certificates.CertificateSigningRequestSpec{...}", IMMUTABLE))
    return causes
