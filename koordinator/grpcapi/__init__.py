"""The gRPC contracts the roles speak: the Kubernetes CRI (``runtime.v1``) and Koordinator's runtime
hook API (``runtime.v1alpha1``).

The ``.proto`` files are written here, with upstream's wire format (same packages, services, methods,
messages, field names, numbers and types); the modules grpcio-tools generates from them
(``*_pb2.py``, ``*_pb2.pyi``, ``*_pb2_grpc.py``) are committed next to each one. Regenerate them with
``python scripts/gen_protos.py``; ``tests/test_grpcapi.py`` fails when they are stale.
"""
