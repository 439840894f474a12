"""Koordinator's runtime hook API (protobuf package ``runtime.v1alpha1``): ``RuntimeHookService``,
served by the koordlet's hook server and called by the koord-runtime-proxy role around CRI calls.
Generated modules: :mod:`.api_pb2` (messages), :mod:`.api_pb2_grpc` (stubs and servicers)."""
