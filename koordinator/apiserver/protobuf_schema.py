"""Field tables for decoding Kubernetes protobuf request bodies (see ``protobuf.py``).

Field numbers and JSON names are those of the upstream ``generated.proto`` files (k8s.io/api
core/v1, apps/v1, batch/v1, policy/v1, rbac/v1, scheduling/v1, coordination/v1, autoscaling/v1,
events/v1, resource/v1 and k8s.io/apimachinery meta/v1, intstr, resource, runtime). Only the
messages that the kinds in ``KINDS`` reach are listed; any other field number is skipped as
unknown by the decoder.

Each message maps a field number to ``"jsonName type[flags]"``:

* types: ``s`` string, ``i`` integer (any varint int32/int64), ``b`` bool, ``y`` bytes (base64 in
  JSON), ``t`` metav1.Time, ``mt`` metav1.MicroTime, ``q`` resource.Quantity, ``ios``
  intstr.IntOrString, ``dur`` metav1.Duration, ``raw`` runtime.RawExtension, ``{v}`` a map from
  string keys to values of type ``v``, or the name of another message in ``MESSAGES``;
* ``*`` repeated;
* ``!`` keep a zero value: the Go field is a pointer (so the marshaller only wrote it because it
  was set) or its JSON tag has no ``omitempty`` (so Go's JSON would have written the zero too);
  without it a zero scalar is dropped, because gogo writes every non-pointer scalar even when
  zero while Go's JSON omits it;
* ``^`` inline: an embedded Go struct (``json:",inline"``) whose fields belong to the parent.

Message names are unqualified where unique across the packages covered here; a name that k8s.io/api
reuses in another package carries that package (``events.Event``, ``resource.ResourceClaim``).
"""

from __future__ import annotations

from typing import NamedTuple

# -- k8s.io/apimachinery meta/v1 ----------------------------------------------------------------

_META = {
    "ObjectMeta": {
        1: "name s", 2: "generateName s", 3: "namespace s", 4: "selfLink s", 5: "uid s",
        6: "resourceVersion s", 7: "generation i", 8: "creationTimestamp t", 9: "deletionTimestamp t",
        10: "deletionGracePeriodSeconds i!", 11: "labels {s}", 12: "annotations {s}",
        13: "ownerReferences OwnerReference*", 14: "finalizers s*",
        # 17 managedFields is left out on purpose: clients never send it on create.
    },
    "OwnerReference": {
        5: "apiVersion s!", 1: "kind s!", 3: "name s!", 4: "uid s!", 6: "controller b!",
        7: "blockOwnerDeletion b!",
    },
    "LabelSelector": {1: "matchLabels {s}", 2: "matchExpressions LabelSelectorRequirement*"},
    "LabelSelectorRequirement": {1: "key s!", 2: "operator s!", 3: "values s*"},
    "Condition": {
        1: "type s!", 2: "status s!", 3: "observedGeneration i", 4: "lastTransitionTime t",
        5: "reason s!", 6: "message s!",
    },
    "DeleteOptions": {
        1: "gracePeriodSeconds i!", 2: "preconditions Preconditions", 3: "orphanDependents b!",
        4: "propagationPolicy s!", 5: "dryRun s*", 6: "ignoreStoreReadErrorWithClusterBreakingPotential b!",
    },
    "Preconditions": {1: "uid s!", 2: "resourceVersion s!"},
}

# -- k8s.io/api core/v1: pod template, containers, volumes, scheduling -----------------------------

_CONTAINER = {
    1: "name s!", 2: "image s", 3: "command s*", 4: "args s*", 5: "workingDir s",
    6: "ports ContainerPort*", 19: "envFrom EnvFromSource*", 7: "env EnvVar*",
    8: "resources ResourceRequirements", 23: "resizePolicy ContainerResizePolicy*", 24: "restartPolicy s!",
    25: "restartPolicyRules ContainerRestartRule*", 9: "volumeMounts VolumeMount*",
    21: "volumeDevices VolumeDevice*", 10: "livenessProbe Probe", 11: "readinessProbe Probe",
    22: "startupProbe Probe", 12: "lifecycle Lifecycle", 13: "terminationMessagePath s",
    20: "terminationMessagePolicy s", 14: "imagePullPolicy s", 15: "securityContext SecurityContext",
    16: "stdin b", 17: "stdinOnce b", 18: "tty b",
}

_POD = {
    "PodTemplateSpec": {1: "metadata ObjectMeta", 2: "spec PodSpec"},
    "PodSpec": {
        1: "volumes Volume*", 20: "initContainers Container*", 2: "containers Container*",
        34: "ephemeralContainers EphemeralContainer*", 3: "restartPolicy s",
        4: "terminationGracePeriodSeconds i!", 5: "activeDeadlineSeconds i!", 6: "dnsPolicy s",
        7: "nodeSelector {s}", 8: "serviceAccountName s", 9: "serviceAccount s",
        21: "automountServiceAccountToken b!", 10: "nodeName s", 11: "hostNetwork b", 12: "hostPID b",
        13: "hostIPC b", 27: "shareProcessNamespace b!", 14: "securityContext PodSecurityContext",
        15: "imagePullSecrets LocalObjectReference*", 16: "hostname s", 17: "subdomain s",
        18: "affinity Affinity", 19: "schedulerName s", 22: "tolerations Toleration*",
        23: "hostAliases HostAlias*", 24: "priorityClassName s", 25: "priority i!", 26: "dnsConfig PodDNSConfig",
        28: "readinessGates PodReadinessGate*", 29: "runtimeClassName s!", 30: "enableServiceLinks b!",
        31: "preemptionPolicy s!", 32: "overhead {q}", 33: "topologySpreadConstraints TopologySpreadConstraint*",
        35: "setHostnameAsFQDN b!", 36: "os PodOS", 37: "hostUsers b!", 38: "schedulingGates PodSchedulingGate*",
        39: "resourceClaims PodResourceClaim*", 40: "resources ResourceRequirements", 41: "hostnameOverride s!",
    },
    "Container": _CONTAINER,
    # EphemeralContainerCommon has exactly Container's fields and numbers.
    "EphemeralContainer": {1: "ephemeralContainerCommon Container^", 2: "targetContainerName s"},
    "ContainerPort": {1: "name s", 2: "hostPort i", 3: "containerPort i!", 4: "protocol s", 5: "hostIP s"},
    "ContainerResizePolicy": {1: "resourceName s!", 2: "restartPolicy s!"},
    "ContainerRestartRule": {1: "action s", 2: "exitCodes ContainerRestartRuleOnExitCodes"},
    "ContainerRestartRuleOnExitCodes": {1: "operator s", 2: "values i*"},
    "EnvFromSource": {1: "prefix s", 2: "configMapRef ConfigMapEnvSource", 3: "secretRef SecretEnvSource"},
    "ConfigMapEnvSource": {1: "localObjectReference LocalObjectReference^", 2: "optional b!"},
    "SecretEnvSource": {1: "localObjectReference LocalObjectReference^", 2: "optional b!"},
    "EnvVar": {1: "name s!", 2: "value s", 3: "valueFrom EnvVarSource"},
    "EnvVarSource": {
        1: "fieldRef ObjectFieldSelector", 2: "resourceFieldRef ResourceFieldSelector",
        3: "configMapKeyRef ConfigMapKeySelector", 4: "secretKeyRef SecretKeySelector",
        5: "fileKeyRef FileKeySelector",
    },
    "ObjectFieldSelector": {1: "apiVersion s", 2: "fieldPath s!"},
    "ResourceFieldSelector": {1: "containerName s", 2: "resource s!", 3: "divisor q"},
    "ConfigMapKeySelector": {1: "localObjectReference LocalObjectReference^", 2: "key s!", 3: "optional b!"},
    "SecretKeySelector": {1: "localObjectReference LocalObjectReference^", 2: "key s!", 3: "optional b!"},
    "FileKeySelector": {1: "volumeName s!", 2: "path s!", 3: "key s!", 4: "optional b!"},
    "LocalObjectReference": {1: "name s"},
    "ResourceRequirements": {1: "limits {q}", 2: "requests {q}", 3: "claims ResourceClaim*"},
    "ResourceClaim": {1: "name s!", 2: "request s"},
    "VolumeMount": {
        1: "name s!", 2: "readOnly b", 7: "recursiveReadOnly s!", 3: "mountPath s!", 4: "subPath s",
        5: "mountPropagation s!", 6: "subPathExpr s",
    },
    "VolumeDevice": {1: "name s!", 2: "devicePath s!"},
    "Probe": {
        1: "handler ProbeHandler^", 2: "initialDelaySeconds i", 3: "timeoutSeconds i", 4: "periodSeconds i",
        5: "successThreshold i", 6: "failureThreshold i", 7: "terminationGracePeriodSeconds i!",
    },
    "ProbeHandler": {1: "exec ExecAction", 2: "httpGet HTTPGetAction", 3: "tcpSocket TCPSocketAction",
                     4: "grpc GRPCAction"},
    "ExecAction": {1: "command s*"},
    "HTTPGetAction": {1: "path s", 2: "port ios", 3: "host s", 4: "scheme s", 5: "httpHeaders HTTPHeader*"},
    "HTTPHeader": {1: "name s!", 2: "value s!"},
    "TCPSocketAction": {1: "port ios", 2: "host s"},
    "GRPCAction": {1: "port i!", 2: "service s!"},
    "Lifecycle": {1: "postStart LifecycleHandler", 2: "preStop LifecycleHandler", 3: "stopSignal s!"},
    "LifecycleHandler": {1: "exec ExecAction", 2: "httpGet HTTPGetAction", 3: "tcpSocket TCPSocketAction",
                         4: "sleep SleepAction"},
    "SleepAction": {1: "seconds i!"},
    "SecurityContext": {
        1: "capabilities Capabilities", 2: "privileged b!", 3: "seLinuxOptions SELinuxOptions",
        10: "windowsOptions WindowsSecurityContextOptions", 4: "runAsUser i!", 8: "runAsGroup i!",
        5: "runAsNonRoot b!", 6: "readOnlyRootFilesystem b!", 7: "allowPrivilegeEscalation b!",
        9: "procMount s!", 11: "seccompProfile SeccompProfile", 12: "appArmorProfile AppArmorProfile",
    },
    "PodSecurityContext": {
        1: "seLinuxOptions SELinuxOptions", 8: "windowsOptions WindowsSecurityContextOptions",
        2: "runAsUser i!", 6: "runAsGroup i!", 3: "runAsNonRoot b!", 4: "supplementalGroups i*",
        12: "supplementalGroupsPolicy s!", 5: "fsGroup i!", 7: "sysctls Sysctl*", 9: "fsGroupChangePolicy s!",
        10: "seccompProfile SeccompProfile", 11: "appArmorProfile AppArmorProfile", 13: "seLinuxChangePolicy s!",
    },
    "Capabilities": {1: "add s*", 2: "drop s*"},
    "SELinuxOptions": {1: "user s", 2: "role s", 3: "type s", 4: "level s"},
    "WindowsSecurityContextOptions": {1: "gmsaCredentialSpecName s!", 2: "gmsaCredentialSpec s!",
                                      3: "runAsUserName s!", 4: "hostProcess b!"},
    "SeccompProfile": {1: "type s!", 2: "localhostProfile s!"},
    "AppArmorProfile": {1: "type s!", 2: "localhostProfile s!"},
    "Sysctl": {1: "name s!", 2: "value s!"},
    "Affinity": {1: "nodeAffinity NodeAffinity", 2: "podAffinity PodAffinity", 3: "podAntiAffinity PodAntiAffinity"},
    "NodeAffinity": {1: "requiredDuringSchedulingIgnoredDuringExecution NodeSelector",
                     2: "preferredDuringSchedulingIgnoredDuringExecution PreferredSchedulingTerm*"},
    "NodeSelector": {1: "nodeSelectorTerms NodeSelectorTerm*"},
    "NodeSelectorTerm": {1: "matchExpressions NodeSelectorRequirement*", 2: "matchFields NodeSelectorRequirement*"},
    "NodeSelectorRequirement": {1: "key s!", 2: "operator s!", 3: "values s*"},
    "PreferredSchedulingTerm": {1: "weight i!", 2: "preference NodeSelectorTerm"},
    "PodAffinity": {1: "requiredDuringSchedulingIgnoredDuringExecution PodAffinityTerm*",
                    2: "preferredDuringSchedulingIgnoredDuringExecution WeightedPodAffinityTerm*"},
    "PodAntiAffinity": {1: "requiredDuringSchedulingIgnoredDuringExecution PodAffinityTerm*",
                        2: "preferredDuringSchedulingIgnoredDuringExecution WeightedPodAffinityTerm*"},
    "PodAffinityTerm": {
        1: "labelSelector LabelSelector", 2: "namespaces s*", 3: "topologyKey s!",
        4: "namespaceSelector LabelSelector", 5: "matchLabelKeys s*", 6: "mismatchLabelKeys s*",
    },
    "WeightedPodAffinityTerm": {1: "weight i!", 2: "podAffinityTerm PodAffinityTerm"},
    "Toleration": {1: "key s", 2: "operator s", 3: "value s", 4: "effect s", 5: "tolerationSeconds i!"},
    "TopologySpreadConstraint": {
        1: "maxSkew i!", 2: "topologyKey s!", 3: "whenUnsatisfiable s!", 4: "labelSelector LabelSelector",
        5: "minDomains i!", 6: "nodeAffinityPolicy s!", 7: "nodeTaintsPolicy s!", 8: "matchLabelKeys s*",
    },
    "HostAlias": {1: "ip s!", 2: "hostnames s*"},
    "PodDNSConfig": {1: "nameservers s*", 2: "searches s*", 3: "options PodDNSConfigOption*"},
    "PodDNSConfigOption": {1: "name s", 2: "value s!"},
    "PodReadinessGate": {1: "conditionType s!"},
    "PodOS": {1: "name s!"},
    "PodSchedulingGate": {1: "name s!"},
    "PodResourceClaim": {1: "name s!", 3: "resourceClaimName s!", 4: "resourceClaimTemplateName s!"},
    "PodStatus": {
        17: "observedGeneration i", 1: "phase s", 2: "conditions PodCondition*", 3: "message s", 4: "reason s",
        11: "nominatedNodeName s", 5: "hostIP s", 16: "hostIPs HostIP*", 6: "podIP s", 12: "podIPs PodIP*",
        7: "startTime t", 10: "initContainerStatuses ContainerStatus*", 8: "containerStatuses ContainerStatus*",
        9: "qosClass s", 13: "ephemeralContainerStatuses ContainerStatus*", 14: "resize s",
    },
    "PodCondition": {1: "type s!", 7: "observedGeneration i", 2: "status s!", 3: "lastProbeTime t",
                     4: "lastTransitionTime t", 5: "reason s", 6: "message s"},
    "PodIP": {1: "ip s!"},
    "HostIP": {1: "ip s!"},
    "ContainerStatus": {
        1: "name s!", 2: "state ContainerState", 3: "lastState ContainerState", 4: "ready b!",
        5: "restartCount i!", 6: "image s!", 7: "imageID s!", 8: "containerID s", 9: "started b!",
        10: "allocatedResources {q}", 11: "resources ResourceRequirements", 12: "volumeMounts VolumeMountStatus*",
        15: "stopSignal s!",
    },
    "ContainerState": {1: "waiting ContainerStateWaiting", 2: "running ContainerStateRunning",
                       3: "terminated ContainerStateTerminated"},
    "ContainerStateWaiting": {1: "reason s", 2: "message s"},
    "ContainerStateRunning": {1: "startedAt t"},
    "ContainerStateTerminated": {1: "exitCode i!", 2: "signal i", 3: "reason s", 4: "message s",
                                 5: "startedAt t", 6: "finishedAt t", 7: "containerID s"},
    "VolumeMountStatus": {1: "name s!", 2: "mountPath s!", 3: "readOnly b", 4: "recursiveReadOnly s!"},
}

_VOLUMES = {
    "Volume": {1: "name s!", 2: "volumeSource VolumeSource^"},
    # The common sources; the in-tree cloud and legacy plugins are skipped as unknown fields.
    "VolumeSource": {
        1: "hostPath HostPathVolumeSource", 2: "emptyDir EmptyDirVolumeSource", 5: "gitRepo GitRepoVolumeSource",
        6: "secret SecretVolumeSource", 7: "nfs NFSVolumeSource",
        10: "persistentVolumeClaim PersistentVolumeClaimVolumeSource", 16: "downwardAPI DownwardAPIVolumeSource",
        19: "configMap ConfigMapVolumeSource", 26: "projected ProjectedVolumeSource", 28: "csi CSIVolumeSource",
        29: "ephemeral EphemeralVolumeSource", 30: "image ImageVolumeSource",
    },
    "HostPathVolumeSource": {1: "path s!", 2: "type s!"},
    "EmptyDirVolumeSource": {1: "medium s", 2: "sizeLimit q"},
    "GitRepoVolumeSource": {1: "repository s!", 2: "revision s", 3: "directory s"},
    "SecretVolumeSource": {1: "secretName s", 2: "items KeyToPath*", 3: "defaultMode i!", 4: "optional b!"},
    "NFSVolumeSource": {1: "server s!", 2: "path s!", 3: "readOnly b"},
    "PersistentVolumeClaimVolumeSource": {1: "claimName s!", 2: "readOnly b"},
    "DownwardAPIVolumeSource": {1: "items DownwardAPIVolumeFile*", 2: "defaultMode i!"},
    "DownwardAPIVolumeFile": {1: "path s!", 2: "fieldRef ObjectFieldSelector",
                              3: "resourceFieldRef ResourceFieldSelector", 4: "mode i!"},
    "ConfigMapVolumeSource": {1: "localObjectReference LocalObjectReference^", 2: "items KeyToPath*",
                              3: "defaultMode i!", 4: "optional b!"},
    "KeyToPath": {1: "key s!", 2: "path s!", 3: "mode i!"},
    "ProjectedVolumeSource": {1: "sources VolumeProjection*", 2: "defaultMode i!"},
    "VolumeProjection": {
        1: "secret SecretProjection", 2: "downwardAPI DownwardAPIProjection", 3: "configMap ConfigMapProjection",
        4: "serviceAccountToken ServiceAccountTokenProjection", 5: "clusterTrustBundle ClusterTrustBundleProjection",
    },
    "SecretProjection": {1: "localObjectReference LocalObjectReference^", 2: "items KeyToPath*", 4: "optional b!"},
    "ConfigMapProjection": {1: "localObjectReference LocalObjectReference^", 2: "items KeyToPath*",
                            4: "optional b!"},
    "DownwardAPIProjection": {1: "items DownwardAPIVolumeFile*"},
    "ServiceAccountTokenProjection": {1: "audience s", 2: "expirationSeconds i!", 3: "path s!"},
    "ClusterTrustBundleProjection": {1: "name s!", 2: "signerName s!", 3: "labelSelector LabelSelector",
                                     5: "optional b!", 4: "path s!"},
    "CSIVolumeSource": {1: "driver s!", 2: "readOnly b!", 3: "fsType s!", 4: "volumeAttributes {s}",
                        5: "nodePublishSecretRef LocalObjectReference"},
    "EphemeralVolumeSource": {1: "volumeClaimTemplate PersistentVolumeClaimTemplate"},
    "ImageVolumeSource": {1: "reference s", 2: "pullPolicy s"},
    "PersistentVolumeClaim": {1: "metadata ObjectMeta", 2: "spec PersistentVolumeClaimSpec",
                              3: "status PersistentVolumeClaimStatus"},
    "PersistentVolumeClaimTemplate": {1: "metadata ObjectMeta", 2: "spec PersistentVolumeClaimSpec"},
    "PersistentVolumeClaimSpec": {
        1: "accessModes s*", 4: "selector LabelSelector", 2: "resources VolumeResourceRequirements",
        3: "volumeName s", 5: "storageClassName s!", 6: "volumeMode s!", 7: "dataSource TypedLocalObjectReference",
        8: "dataSourceRef TypedObjectReference", 9: "volumeAttributesClassName s!",
    },
    "PersistentVolumeClaimStatus": {1: "phase s", 2: "accessModes s*", 3: "capacity {q}"},
    "VolumeResourceRequirements": {1: "limits {q}", 2: "requests {q}"},
    "TypedLocalObjectReference": {1: "apiGroup s!", 2: "kind s!", 3: "name s!"},
    "TypedObjectReference": {1: "apiGroup s!", 2: "kind s!", 3: "name s!", 4: "namespace s!"},
}

# -- k8s.io/api core/v1: the other top-level kinds ------------------------------------------------

_CORE = {
    "Pod": {1: "metadata ObjectMeta", 2: "spec PodSpec", 3: "status PodStatus"},
    "Binding": {1: "metadata ObjectMeta", 2: "target ObjectReference"},
    "ObjectReference": {1: "kind s", 2: "namespace s", 3: "name s", 4: "uid s", 5: "apiVersion s",
                        6: "resourceVersion s", 7: "fieldPath s"},
    "ConfigMap": {1: "metadata ObjectMeta", 4: "immutable b!", 2: "data {s}", 3: "binaryData {y}"},
    "Secret": {1: "metadata ObjectMeta", 5: "immutable b!", 2: "data {y}", 4: "stringData {s}", 3: "type s"},
    "Namespace": {1: "metadata ObjectMeta", 2: "spec NamespaceSpec", 3: "status NamespaceStatus"},
    "NamespaceSpec": {1: "finalizers s*"},
    "NamespaceStatus": {1: "phase s", 2: "conditions NamespaceCondition*"},
    "NamespaceCondition": {1: "type s!", 2: "status s!", 4: "lastTransitionTime t", 5: "reason s", 6: "message s"},
    "ServiceAccount": {1: "metadata ObjectMeta", 2: "secrets ObjectReference*",
                       3: "imagePullSecrets LocalObjectReference*", 4: "automountServiceAccountToken b!"},
    "Service": {1: "metadata ObjectMeta", 2: "spec ServiceSpec", 3: "status ServiceStatus"},
    "ServiceSpec": {
        1: "ports ServicePort*", 2: "selector {s}", 3: "clusterIP s", 18: "clusterIPs s*", 4: "type s",
        5: "externalIPs s*", 7: "sessionAffinity s", 8: "loadBalancerIP s", 9: "loadBalancerSourceRanges s*",
        10: "externalName s", 11: "externalTrafficPolicy s", 12: "healthCheckNodePort i",
        13: "publishNotReadyAddresses b", 14: "sessionAffinityConfig SessionAffinityConfig", 19: "ipFamilies s*",
        17: "ipFamilyPolicy s!", 20: "allocateLoadBalancerNodePorts b!", 21: "loadBalancerClass s!",
        22: "internalTrafficPolicy s!", 23: "trafficDistribution s!",
    },
    "ServicePort": {1: "name s", 2: "protocol s", 6: "appProtocol s!", 3: "port i!", 4: "targetPort ios",
                    5: "nodePort i"},
    "SessionAffinityConfig": {1: "clientIP ClientIPConfig"},
    "ClientIPConfig": {1: "timeoutSeconds i!"},
    "ServiceStatus": {1: "loadBalancer LoadBalancerStatus", 2: "conditions Condition*"},
    "LoadBalancerStatus": {1: "ingress LoadBalancerIngress*"},
    "LoadBalancerIngress": {1: "ip s", 2: "hostname s", 3: "ipMode s!", 4: "ports PortStatus*"},
    "PortStatus": {1: "port i!", 2: "protocol s!", 3: "error s!"},
    "Endpoints": {1: "metadata ObjectMeta", 2: "subsets EndpointSubset*"},
    "EndpointSubset": {1: "addresses EndpointAddress*", 2: "notReadyAddresses EndpointAddress*",
                       3: "ports EndpointPort*"},
    "EndpointAddress": {1: "ip s!", 3: "hostname s", 4: "nodeName s!", 2: "targetRef ObjectReference"},
    "EndpointPort": {1: "name s", 2: "port i!", 3: "protocol s", 4: "appProtocol s!"},
    "Event": {
        1: "metadata ObjectMeta", 2: "involvedObject ObjectReference", 3: "reason s", 4: "message s",
        5: "source EventSource", 6: "firstTimestamp t", 7: "lastTimestamp t", 8: "count i", 9: "type s",
        10: "eventTime mt", 11: "series EventSeries", 12: "action s", 13: "related ObjectReference",
        14: "reportingComponent s!", 15: "reportingInstance s!",
    },
    "EventSource": {1: "component s", 2: "host s"},
    "EventSeries": {1: "count i", 2: "lastObservedTime mt"},
    "Node": {1: "metadata ObjectMeta", 2: "spec NodeSpec", 3: "status NodeStatus"},
    "NodeSpec": {1: "podCIDR s", 7: "podCIDRs s*", 3: "providerID s", 4: "unschedulable b", 5: "taints Taint*",
                 2: "externalID s"},
    "Taint": {1: "key s!", 2: "value s", 3: "effect s!", 4: "timeAdded t"},
    "NodeStatus": {
        1: "capacity {q}", 2: "allocatable {q}", 3: "phase s", 4: "conditions NodeCondition*",
        5: "addresses NodeAddress*", 6: "daemonEndpoints NodeDaemonEndpoints", 7: "nodeInfo NodeSystemInfo",
        8: "images ContainerImage*", 9: "volumesInUse s*", 10: "volumesAttached AttachedVolume*",
    },
    "NodeCondition": {1: "type s!", 2: "status s!", 3: "lastHeartbeatTime t", 4: "lastTransitionTime t",
                      5: "reason s", 6: "message s"},
    "NodeAddress": {1: "type s!", 2: "address s!"},
    "NodeDaemonEndpoints": {1: "kubeletEndpoint DaemonEndpoint"},
    "DaemonEndpoint": {1: "Port i!"},
    "NodeSystemInfo": {
        1: "machineID s!", 2: "systemUUID s!", 3: "bootID s!", 4: "kernelVersion s!", 5: "osImage s!",
        6: "containerRuntimeVersion s!", 7: "kubeletVersion s!", 8: "kubeProxyVersion s!",
        9: "operatingSystem s!", 10: "architecture s!",
    },
    "ContainerImage": {1: "names s*", 2: "sizeBytes i"},
    "AttachedVolume": {1: "name s!", 2: "devicePath s!"},
}

# -- apps/v1 ------------------------------------------------------------------------------------

_WORKLOAD_CONDITION = {1: "type s!", 2: "status s!", 3: "lastTransitionTime t", 4: "reason s", 5: "message s"}

_APPS = {
    "Deployment": {1: "metadata ObjectMeta", 2: "spec DeploymentSpec", 3: "status DeploymentStatus"},
    "DeploymentSpec": {
        1: "replicas i!", 2: "selector LabelSelector", 3: "template PodTemplateSpec", 4: "strategy DeploymentStrategy",
        5: "minReadySeconds i", 6: "revisionHistoryLimit i!", 7: "paused b", 9: "progressDeadlineSeconds i!",
        10: "podReplacementPolicy s!",
    },
    "DeploymentStrategy": {1: "type s", 2: "rollingUpdate RollingUpdateDeployment"},
    "RollingUpdateDeployment": {1: "maxUnavailable ios", 2: "maxSurge ios"},
    "DeploymentStatus": {
        1: "observedGeneration i", 2: "replicas i", 3: "updatedReplicas i", 7: "readyReplicas i",
        4: "availableReplicas i", 5: "unavailableReplicas i", 9: "terminatingReplicas i!",
        6: "conditions DeploymentCondition*", 8: "collisionCount i!",
    },
    "DeploymentCondition": {1: "type s!", 2: "status s!", 6: "lastUpdateTime t", 7: "lastTransitionTime t",
                            4: "reason s", 5: "message s"},
    "ReplicaSet": {1: "metadata ObjectMeta", 2: "spec ReplicaSetSpec", 3: "status ReplicaSetStatus"},
    "ReplicaSetSpec": {1: "replicas i!", 4: "minReadySeconds i", 2: "selector LabelSelector",
                       3: "template PodTemplateSpec"},
    "ReplicaSetStatus": {
        1: "replicas i!", 2: "fullyLabeledReplicas i", 4: "readyReplicas i", 5: "availableReplicas i",
        7: "terminatingReplicas i!", 3: "observedGeneration i", 6: "conditions ReplicaSetCondition*",
    },
    "ReplicaSetCondition": _WORKLOAD_CONDITION,
    "StatefulSet": {1: "metadata ObjectMeta", 2: "spec StatefulSetSpec", 3: "status StatefulSetStatus"},
    "StatefulSetSpec": {
        1: "replicas i!", 2: "selector LabelSelector", 3: "template PodTemplateSpec",
        4: "volumeClaimTemplates PersistentVolumeClaim*", 5: "serviceName s", 6: "podManagementPolicy s",
        7: "updateStrategy StatefulSetUpdateStrategy", 8: "revisionHistoryLimit i!", 9: "minReadySeconds i",
        10: "persistentVolumeClaimRetentionPolicy StatefulSetPersistentVolumeClaimRetentionPolicy",
        11: "ordinals StatefulSetOrdinals",
    },
    "StatefulSetUpdateStrategy": {1: "type s", 2: "rollingUpdate RollingUpdateStatefulSetStrategy"},
    "RollingUpdateStatefulSetStrategy": {1: "partition i!", 2: "maxUnavailable ios"},
    "StatefulSetPersistentVolumeClaimRetentionPolicy": {1: "whenDeleted s", 2: "whenScaled s"},
    "StatefulSetOrdinals": {1: "start i"},
    "StatefulSetStatus": {
        1: "observedGeneration i", 2: "replicas i!", 3: "readyReplicas i", 4: "currentReplicas i",
        5: "updatedReplicas i", 6: "currentRevision s", 7: "updateRevision s", 9: "collisionCount i!",
        10: "conditions StatefulSetCondition*", 11: "availableReplicas i!",
    },
    "StatefulSetCondition": _WORKLOAD_CONDITION,
    "DaemonSet": {1: "metadata ObjectMeta", 2: "spec DaemonSetSpec", 3: "status DaemonSetStatus"},
    "DaemonSetSpec": {1: "selector LabelSelector", 2: "template PodTemplateSpec",
                      3: "updateStrategy DaemonSetUpdateStrategy", 4: "minReadySeconds i",
                      6: "revisionHistoryLimit i!"},
    "DaemonSetUpdateStrategy": {1: "type s", 2: "rollingUpdate RollingUpdateDaemonSet"},
    "RollingUpdateDaemonSet": {1: "maxUnavailable ios", 2: "maxSurge ios"},
    "DaemonSetStatus": {
        1: "currentNumberScheduled i!", 2: "numberMisscheduled i!", 3: "desiredNumberScheduled i!",
        4: "numberReady i!", 5: "observedGeneration i", 6: "updatedNumberScheduled i", 7: "numberAvailable i",
        8: "numberUnavailable i", 9: "collisionCount i!", 10: "conditions DaemonSetCondition*",
    },
    "DaemonSetCondition": _WORKLOAD_CONDITION,
    "ControllerRevision": {1: "metadata ObjectMeta", 2: "data raw", 3: "revision i!"},
}

# -- batch/v1 -----------------------------------------------------------------------------------

_BATCH = {
    "Job": {1: "metadata ObjectMeta", 2: "spec JobSpec", 3: "status JobStatus"},
    "JobSpec": {
        1: "parallelism i!", 2: "completions i!", 3: "activeDeadlineSeconds i!",
        11: "podFailurePolicy PodFailurePolicy",
        16: "successPolicy SuccessPolicy", 7: "backoffLimit i!", 12: "backoffLimitPerIndex i!",
        13: "maxFailedIndexes i!", 4: "selector LabelSelector", 5: "manualSelector b!", 6: "template PodTemplateSpec",
        8: "ttlSecondsAfterFinished i!", 9: "completionMode s!", 10: "suspend b!", 14: "podReplacementPolicy s!",
        15: "managedBy s!",
    },
    "JobStatus": {
        1: "conditions JobCondition*", 2: "startTime t", 3: "completionTime t", 4: "active i", 5: "succeeded i",
        6: "failed i", 11: "terminating i!", 7: "completedIndexes s", 10: "failedIndexes s!",
        8: "uncountedTerminatedPods UncountedTerminatedPods", 9: "ready i!",
    },
    "JobCondition": {1: "type s!", 2: "status s!", 3: "lastProbeTime t", 4: "lastTransitionTime t",
                     5: "reason s", 6: "message s"},
    "UncountedTerminatedPods": {1: "succeeded s*", 2: "failed s*"},
    "PodFailurePolicy": {1: "rules PodFailurePolicyRule*"},
    "PodFailurePolicyRule": {1: "action s!", 2: "onExitCodes PodFailurePolicyOnExitCodesRequirement",
                             3: "onPodConditions PodFailurePolicyOnPodConditionsPattern*"},
    "PodFailurePolicyOnExitCodesRequirement": {1: "containerName s!", 2: "operator s!", 3: "values i*"},
    "PodFailurePolicyOnPodConditionsPattern": {1: "type s!", 2: "status s"},
    "SuccessPolicy": {1: "rules SuccessPolicyRule*"},
    "SuccessPolicyRule": {1: "succeededIndexes s!", 2: "succeededCount i!"},
    "JobTemplateSpec": {1: "metadata ObjectMeta", 2: "spec JobSpec"},
    "CronJob": {1: "metadata ObjectMeta", 2: "spec CronJobSpec", 3: "status CronJobStatus"},
    "CronJobSpec": {
        1: "schedule s!", 8: "timeZone s!", 2: "startingDeadlineSeconds i!", 3: "concurrencyPolicy s",
        4: "suspend b!", 5: "jobTemplate JobTemplateSpec", 6: "successfulJobsHistoryLimit i!",
        7: "failedJobsHistoryLimit i!",
    },
    "CronJobStatus": {1: "active ObjectReference*", 4: "lastScheduleTime t", 5: "lastSuccessfulTime t"},
}

# -- policy/v1, rbac/v1, scheduling/v1, coordination/v1, autoscaling/v1 -------------------------------

_OTHER = {
    # authentication/v1: the body of serviceaccounts/token (kubectl create token).
    "TokenRequest": {1: "metadata ObjectMeta", 2: "spec TokenRequestSpec", 3: "status TokenRequestStatus"},
    "TokenRequestSpec": {1: "audiences s*", 4: "expirationSeconds i!", 3: "boundObjectRef BoundObjectReference"},
    "BoundObjectReference": {1: "kind s", 2: "apiVersion s", 3: "name s", 4: "uid s"},
    "TokenRequestStatus": {1: "token s!", 2: "expirationTimestamp t!"},
    "PodDisruptionBudget": {1: "metadata ObjectMeta", 2: "spec PodDisruptionBudgetSpec",
                            3: "status PodDisruptionBudgetStatus"},
    "PodDisruptionBudgetSpec": {1: "minAvailable ios", 2: "selector LabelSelector", 3: "maxUnavailable ios",
                                4: "unhealthyPodEvictionPolicy s!"},
    "PodDisruptionBudgetStatus": {
        1: "observedGeneration i", 2: "disruptedPods {t}", 3: "disruptionsAllowed i!", 4: "currentHealthy i!",
        5: "desiredHealthy i!", 6: "expectedPods i!", 7: "conditions Condition*",
    },
    "Eviction": {1: "metadata ObjectMeta", 2: "deleteOptions DeleteOptions"},
    "Role": {1: "metadata ObjectMeta", 2: "rules PolicyRule*"},
    "ClusterRole": {1: "metadata ObjectMeta", 2: "rules PolicyRule*", 3: "aggregationRule AggregationRule"},
    "PolicyRule": {1: "verbs s*", 2: "apiGroups s*", 3: "resources s*", 4: "resourceNames s*",
                   5: "nonResourceURLs s*"},
    "AggregationRule": {1: "clusterRoleSelectors LabelSelector*"},
    "RoleBinding": {1: "metadata ObjectMeta", 2: "subjects Subject*", 3: "roleRef RoleRef"},
    "ClusterRoleBinding": {1: "metadata ObjectMeta", 2: "subjects Subject*", 3: "roleRef RoleRef"},
    "Subject": {1: "kind s!", 2: "apiGroup s", 3: "name s!", 4: "namespace s"},
    "RoleRef": {1: "apiGroup s!", 2: "kind s!", 3: "name s!"},
    "PriorityClass": {1: "metadata ObjectMeta", 2: "value i!", 3: "globalDefault b", 4: "description s",
                      5: "preemptionPolicy s!"},
    "Lease": {1: "metadata ObjectMeta", 2: "spec LeaseSpec"},
    "LeaseSpec": {
        1: "holderIdentity s!", 2: "leaseDurationSeconds i!", 3: "acquireTime mt", 4: "renewTime mt",
        5: "leaseTransitions i!", 6: "strategy s!", 7: "preferredHolder s!",
    },
    "Scale": {1: "metadata ObjectMeta", 2: "spec ScaleSpec", 3: "status ScaleStatus"},
    "ScaleSpec": {1: "replicas i"},
    "ScaleStatus": {1: "replicas i!", 2: "selector s"},
}

# -- events.k8s.io/v1 and resource.k8s.io/v1 --------------------------------------------------------
# Names that k8s.io/api reuses across packages carry their package here ("events.Event",
# "resource.ResourceClaim"); the rest are unique.

_EVENTS = {
    "events.Event": {
        1: "metadata ObjectMeta", 2: "eventTime mt", 3: "series EventSeries", 4: "reportingController s",
        5: "reportingInstance s", 6: "action s", 7: "reason s", 8: "regarding ObjectReference",
        9: "related ObjectReference", 10: "note s", 11: "type s", 12: "deprecatedSource EventSource",
        13: "deprecatedFirstTimestamp t", 14: "deprecatedLastTimestamp t", 15: "deprecatedCount i",
    },
}

_RESOURCE = {
    "resource.ResourceClaim": {1: "metadata ObjectMeta", 2: "spec ResourceClaimSpec", 3: "status ResourceClaimStatus"},
    "ResourceClaimSpec": {1: "devices DeviceClaim"},
    "DeviceClaim": {1: "requests DeviceRequest*", 2: "constraints DeviceConstraint*",
                    3: "config DeviceClaimConfiguration*"},
    "DeviceRequest": {1: "name s!", 2: "exactly ExactDeviceRequest", 3: "firstAvailable DeviceSubRequest*"},
    "ExactDeviceRequest": {
        1: "deviceClassName s!", 2: "selectors DeviceSelector*", 3: "allocationMode s", 4: "count i",
        5: "adminAccess b!", 6: "tolerations DeviceToleration*", 7: "capacity CapacityRequirements",
    },
    "DeviceSubRequest": {
        1: "name s!", 2: "deviceClassName s!", 3: "selectors DeviceSelector*", 4: "allocationMode s", 5: "count i",
        6: "tolerations DeviceToleration*", 7: "capacity CapacityRequirements",
    },
    "DeviceSelector": {1: "cel CELDeviceSelector"},
    "CELDeviceSelector": {1: "expression s!"},
    "CapacityRequirements": {1: "requests {q}"},
    "DeviceToleration": {1: "key s", 2: "operator s", 3: "value s", 4: "effect s", 5: "tolerationSeconds i!"},
    "DeviceConstraint": {1: "requests s*", 2: "matchAttribute s!", 3: "distinctAttribute s!"},
    "DeviceClaimConfiguration": {1: "requests s*", 2: "deviceConfiguration DeviceConfiguration^"},
    "DeviceConfiguration": {1: "opaque OpaqueDeviceConfiguration"},
    "OpaqueDeviceConfiguration": {1: "driver s!", 2: "parameters raw"},
    "ResourceClaimStatus": {1: "allocation AllocationResult", 2: "reservedFor ResourceClaimConsumerReference*",
                            4: "devices AllocatedDeviceStatus*"},
    "AllocationResult": {1: "devices DeviceAllocationResult", 3: "nodeSelector NodeSelector",
                         5: "allocationTimestamp t"},
    "DeviceAllocationResult": {1: "results DeviceRequestAllocationResult*", 2: "config DeviceAllocationConfiguration*"},
    "DeviceRequestAllocationResult": {
        1: "request s!", 2: "driver s!", 3: "pool s!", 4: "device s!", 5: "adminAccess b!",
        6: "tolerations DeviceToleration*", 7: "bindingConditions s*", 8: "bindingFailureConditions s*",
        9: "shareID s!", 10: "consumedCapacity {q}",
    },
    "DeviceAllocationConfiguration": {1: "source s!", 2: "requests s*", 3: "deviceConfiguration DeviceConfiguration^"},
    "ResourceClaimConsumerReference": {1: "apiGroup s", 3: "resource s!", 4: "name s!", 5: "uid s!"},
    "AllocatedDeviceStatus": {
        1: "driver s!", 2: "pool s!", 3: "device s!", 7: "shareID s!", 4: "conditions Condition*", 5: "data raw",
        6: "networkData NetworkDeviceData",
    },
    "NetworkDeviceData": {1: "interfaceName s", 2: "ips s*", 3: "hardwareAddress s"},
    "ResourceClaimTemplate": {1: "metadata ObjectMeta", 2: "spec ResourceClaimTemplateSpec"},
    "ResourceClaimTemplateSpec": {1: "metadata ObjectMeta", 2: "spec ResourceClaimSpec"},
    "DeviceClass": {1: "metadata ObjectMeta", 2: "spec DeviceClassSpec"},
    "DeviceClassSpec": {1: "selectors DeviceSelector*", 2: "config DeviceClassConfiguration*",
                        4: "extendedResourceName s!"},
    "DeviceClassConfiguration": {1: "deviceConfiguration DeviceConfiguration^"},
    "ResourceSlice": {1: "metadata ObjectMeta", 2: "spec ResourceSliceSpec"},
    "ResourceSliceSpec": {
        1: "driver s!", 2: "pool ResourcePool", 3: "nodeName s!", 4: "nodeSelector NodeSelector", 5: "allNodes b!",
        6: "devices Device*", 7: "perDeviceNodeSelection b!", 8: "sharedCounters CounterSet*",
    },
    "ResourcePool": {1: "name s!", 2: "generation i!", 3: "resourceSliceCount i!"},
    "Device": {
        1: "name s!", 2: "attributes {DeviceAttribute}", 3: "capacity {DeviceCapacity}",
        4: "consumesCounters DeviceCounterConsumption*", 5: "nodeName s!", 6: "nodeSelector NodeSelector",
        7: "allNodes b!", 8: "taints DeviceTaint*", 9: "bindsToNode b!", 10: "bindingConditions s*",
        11: "bindingFailureConditions s*", 12: "allowMultipleAllocations b!",
    },
    "DeviceAttribute": {2: "int i!", 3: "bool b!", 4: "string s!", 5: "version s!"},
    "DeviceCapacity": {1: "value q", 2: "requestPolicy CapacityRequestPolicy"},
    "CapacityRequestPolicy": {1: "default q", 3: "validValues q*", 4: "validRange CapacityRequestPolicyRange"},
    "CapacityRequestPolicyRange": {1: "min q", 2: "max q", 3: "step q"},
    "DeviceCounterConsumption": {1: "counterSet s!", 2: "counters {Counter}"},
    "CounterSet": {1: "name s!", 2: "counters {Counter}"},
    "Counter": {1: "value q"},
    "DeviceTaint": {1: "key s!", 2: "value s", 3: "effect s!", 4: "timeAdded t"},
}

# -- authorization/v1: the access reviews (kubectl auth can-i sends them so) ------------------------

_AUTHZ = {
    "SelfSubjectAccessReview": {1: "metadata ObjectMeta", 2: "spec SelfSubjectAccessReviewSpec"},
    "SelfSubjectAccessReviewSpec": {1: "resourceAttributes ResourceAttributes",
                                    2: "nonResourceAttributes NonResourceAttributes"},
    "ResourceAttributes": {1: "namespace s", 2: "verb s", 3: "group s", 4: "version s", 5: "resource s",
                           6: "subresource s", 7: "name s"},
    "NonResourceAttributes": {1: "path s", 2: "verb s"},
    "SubjectAccessReview": {1: "metadata ObjectMeta", 2: "spec SubjectAccessReviewSpec"},
    "SubjectAccessReviewSpec": {1: "resourceAttributes ResourceAttributes",
                                2: "nonResourceAttributes NonResourceAttributes", 3: "user s", 4: "groups s*",
                                6: "uid s"},
    "SelfSubjectRulesReview": {1: "metadata ObjectMeta", 2: "spec SelfSubjectRulesReviewSpec"},
    "SelfSubjectRulesReviewSpec": {1: "namespace s"},
}

# (apiVersion, kind) of an envelope -> top-level message. "*" matches any apiVersion: client-go
# sends DeleteOptions under whichever group version the typed client talks to.
KINDS: dict[tuple[str, str], str] = {
    **{("v1", k): k for k in ("Pod", "Node", "Namespace", "ConfigMap", "Secret", "Service", "ServiceAccount",
                              "Endpoints", "Event", "Binding")},
    **{("apps/v1", k): k for k in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision")},
    ("batch/v1", "Job"): "Job",
    ("batch/v1", "CronJob"): "CronJob",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",
    ("policy/v1beta1", "Eviction"): "Eviction",
    **{("rbac.authorization.k8s.io/v1", k): k for k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")},
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("coordination.k8s.io/v1", "Lease"): "Lease",
    ("autoscaling/v1", "Scale"): "Scale",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("events.k8s.io/v1", "Event"): "events.Event",
    ("resource.k8s.io/v1", "ResourceClaim"): "resource.ResourceClaim",
    **{("resource.k8s.io/v1", k): k for k in ("ResourceClaimTemplate", "DeviceClass", "ResourceSlice")},
    **{("authorization.k8s.io/v1", k): k for k in ("SelfSubjectAccessReview", "SubjectAccessReview",
                                                   "SelfSubjectRulesReview")},
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): "SubjectAccessReview",
    ("*", "DeleteOptions"): "DeleteOptions",
}


# -- parsed form ----------------------------------------------------------------------------------

SCALARS = {"s", "i", "b", "y", "t", "mt", "q", "ios", "dur", "raw"}


class Field(NamedTuple):
    """One parsed field of a message."""

    name: str  # JSON name
    type: str  # a scalar code from SCALARS or a message name
    map_value: bool  # a map<string, type>
    repeated: bool
    keep_zero: bool
    inline: bool


def _parse(spec: str) -> Field:
    name, _, rest = spec.partition(" ")
    flags = set()
    while rest and rest[-1] in "*!^":
        flags.add(rest[-1])
        rest = rest[:-1]
    is_map = rest.startswith("{") and rest.endswith("}")
    if is_map:
        rest = rest[1:-1]
    return Field(name, rest, is_map, "*" in flags, "!" in flags, "^" in flags)


def _build() -> dict[str, dict[int, Field]]:
    raw: dict[str, dict[int, str]] = {**_META, **_POD, **_VOLUMES, **_CORE, **_APPS, **_BATCH, **_OTHER,
                                      **_EVENTS, **_RESOURCE, **_AUTHZ}
    return {msg: {num: _parse(spec) for num, spec in fields.items()} for msg, fields in raw.items()}


MESSAGES: dict[str, dict[int, Field]] = _build()


def message_for(api_version: str, kind: str) -> str | None:
    """The top-level message for an envelope's (apiVersion, kind), or None when there is no schema."""
    return KINDS.get((api_version, kind)) or KINDS.get(("*", kind))
