# syntax=docker/dockerfile:1
#
# One image for every Koordinator role:
#   docker build -t koordinator:latest .
#   docker run --rm koordinator:latest --role=scheduler --help
# The manifests (manifests/) select the role with --role=...; koordlet and the device daemon
# override the non-root user below with runAsUser: 0 (they manage the host).

# ---- build: turn the source tree into a wheel ------------------------------------------------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY koordinator/ koordinator/
COPY roles/ roles/
COPY schemas/ schemas/
RUN pip wheel --no-deps --wheel-dir /dist .

# ---- runtime: the wheel and its dependencies, nothing else -----------------------------------
FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /dist/ /tmp/dist/
RUN pip install /tmp/dist/*.whl \
 && rm -rf /tmp/dist \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin nonroot
# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["koordinator"]
