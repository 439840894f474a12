"""ServiceAccount issuer discovery: the OpenID provider configuration and the signing key set.

``GET /.well-known/openid-configuration`` and ``GET /openid/v1/jwks`` answer as kube-apiserver's
(``pkg/serviceaccount/openidmetadata.go``), so a relying party (a cloud IAM, Vault) can verify
ServiceAccount tokens without calling the server: the configuration names the issuer and where
its keys are, the key set holds the public key under the ``kid`` the tokens carry. Both are
non-resource URLs, authorized as such (bootstrap ClusterRole
``system:service-account-issuer-discovery``, bound to every ServiceAccount).

kube serves them only for an ``https`` issuer URL (an OpenID issuer must be one); for any other
issuer the paths are 404, as there.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from koordinator.apiserver import errors
from koordinator.apiserver.authentication import ServiceAccountTokens
from koordinator.apiserver.http import Response

CONFIGURATION_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
# kube lets relying parties cache both documents for an hour.
CACHE_CONTROL = "public, max-age=3600"


def _served(tokens: ServiceAccountTokens) -> bool:
    parts = urlsplit(tokens.issuer)
    return parts.scheme == "https" and bool(parts.netloc)


def configuration(tokens: ServiceAccountTokens, server_address: str) -> Response:
    """The OpenID provider configuration; its ``jwks_uri`` is on the server's own address, as kube's
    default (``https://<external address>/openid/v1/jwks``)."""
    if not _served(tokens):
        raise errors.not_found_path()
    doc = {"issuer": tokens.issuer, "jwks_uri": f"https://{server_address}{JWKS_PATH}",
           "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
           "id_token_signing_alg_values_supported": ["RS256"]}
    return Response.json(200, doc, {"Cache-Control": CACHE_CONTROL})


def key_set(tokens: ServiceAccountTokens) -> Response:
    """The JSON Web Key Set that verifies the server's ServiceAccount tokens."""
    if not _served(tokens):
        raise errors.not_found_path()
    response = Response.json(200, tokens.jwks(), {"Cache-Control": CACHE_CONTROL})
    response.content_type = "application/jwk-set+json"
    return response
