"""The Kubernetes CRI v1 (protobuf package ``runtime.v1``): ``RuntimeService`` and ``ImageService``,
which the koord-runtime-proxy role serves to the kubelet and calls on the container runtime.
Generated modules: :mod:`.api_pb2` (messages), :mod:`.api_pb2_grpc` (stubs and servicers)."""
