#!/usr/bin/env python3
"""Derive proto/data/messages.json from the upstream Kubernetes protobuf IDL.

Reads every `generated.proto` below PROTO_ROOT (proto2 files of the
`k8s.io.api.*` and `k8s.io.apimachinery.*` packages) and writes, for each
fully qualified message name, the list of its fields in declaration order
(which is the order of the Go struct and so of the JSON kube writes):

    {"n": field number, "name": JSON name, "type": scalar or message name,
     "label": "optional" | "repeated",
     "key"/"value": map key and value types (type is then "map"),
     "keepZero": true   -- a zero scalar is meaningful, keep it in JSON,
     "inline": true}    -- an embedded Go struct whose fields JSON inlines

The OpenAPI document (OPENAPI, optional) supplies facts the IDL lacks:
  * JSON names that differ from the protobuf names (`aPIGroup` -> `apiGroup`),
  * embedded structs that JSON inlines (`Volume.volumeSource`),
  * required fields: Go fields without `omitempty`, so kube writes their zero
    values (`keepZero`),
  * the API group of each package (`x-kubernetes-group-version-kind`).

`keepZero` is also set for the scalar fields listed in POINTER_FIELDS: Go
pointer fields, where an explicit zero differs from "not set" (for example
`DeploymentSpec.replicas: 0`). The IDL does not say which Go fields are
pointers, so that list is maintained here by hand.

Comments of the IDL are not read into the output. The output is compact JSON
with sorted keys; regenerating from the same input yields the same bytes.

Usage:
    tools/gen_proto.py [PROTO_ROOT] [--openapi SWAGGER_JSON] [-o OUTPUT] [--check]

PROTO_ROOT defaults to ../shared/k8s-api/proto next to the repository,
SWAGGER_JSON to ../shared/k8s-api/openapi/swagger.json, OUTPUT to
proto/data/messages.json. With --check nothing is written; the exit status
tells whether OUTPUT is up to date.

Python 3 standard library only.
"""

import argparse
import json
import os
import re
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(REPO_ROOT, os.pardir, "shared", "k8s-api")
DEFAULT_PROTO_ROOT = os.path.join(SHARED, "proto")
DEFAULT_OPENAPI = os.path.join(SHARED, "openapi", "swagger.json")
DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "proto", "data", "messages.json")

SCALARS = {
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32",
    "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64", "bool",
    "string", "bytes",
}

# API groups of packages that the OpenAPI document has no kinds for.
EXTRA_GROUPS = {
    "admission.k8s.io": "admission",
    "apidiscovery.k8s.io": "apidiscovery",
    "extensions": "extensions",
    "imagepolicy.k8s.io": "imagepolicy",
}

# Scalar fields whose zero value is meaningful (Go pointers: nil differs from
# zero), so the decoder keeps an explicit zero/false/"" instead of dropping it
# the way `omitempty` drops zero values of plain fields.
# "Message.field" applies in every package; "x/Message.field" only in the
# packages k8s.io.api.x.* ("meta/..." for k8s.io.apimachinery.pkg.apis.meta.*).
POINTER_FIELDS = """
meta/ObjectMeta.deletionGracePeriodSeconds
meta/ListMeta.remainingItemCount
meta/DeleteOptions.gracePeriodSeconds
meta/DeleteOptions.orphanDependents
meta/DeleteOptions.propagationPolicy
meta/DeleteOptions.ignoreStoreReadErrorWithClusterBreakingPotential
meta/OwnerReference.controller
meta/OwnerReference.blockOwnerDeletion
meta/PatchOptions.force
meta/ApplyOptions.force
meta/ListOptions.timeoutSeconds
meta/ListOptions.sendInitialEvents
Preconditions.uid
Preconditions.resourceVersion

core/PodSpec.terminationGracePeriodSeconds
core/PodSpec.activeDeadlineSeconds
core/PodSpec.automountServiceAccountToken
core/PodSpec.shareProcessNamespace
core/PodSpec.priority
core/PodSpec.enableServiceLinks
core/PodSpec.setHostnameAsFQDN
core/PodSpec.hostUsers
core/PodSpec.preemptionPolicy
core/PodSpec.runtimeClassName
core/PodSecurityContext.runAsUser
core/PodSecurityContext.runAsGroup
core/PodSecurityContext.runAsNonRoot
core/PodSecurityContext.fsGroup
core/PodSecurityContext.fsGroupChangePolicy
core/PodSecurityContext.supplementalGroupsPolicy
core/PodSecurityContext.seLinuxChangePolicy
core/SecurityContext.privileged
core/SecurityContext.runAsUser
core/SecurityContext.runAsGroup
core/SecurityContext.runAsNonRoot
core/SecurityContext.readOnlyRootFilesystem
core/SecurityContext.allowPrivilegeEscalation
core/SecurityContext.procMount
core/WindowsSecurityContextOptions.gmsaCredentialSpecName
core/WindowsSecurityContextOptions.gmsaCredentialSpec
core/WindowsSecurityContextOptions.runAsUserName
core/WindowsSecurityContextOptions.hostProcess
core/AppArmorProfile.localhostProfile
core/SeccompProfile.localhostProfile
core/Probe.terminationGracePeriodSeconds
core/GRPCAction.service
core/Container.restartPolicy
core/EphemeralContainerCommon.restartPolicy
core/Lifecycle.stopSignal
core/ContainerStatus.started
core/ContainerStatus.stopSignal
core/ConfigMap.immutable
core/Secret.immutable
core/ConfigMapVolumeSource.defaultMode
core/ConfigMapVolumeSource.optional
core/ConfigMapVolumeSource.defaultUser
core/SecretVolumeSource.defaultMode
core/SecretVolumeSource.optional
core/SecretVolumeSource.defaultUser
core/DownwardAPIVolumeSource.defaultMode
core/DownwardAPIVolumeSource.defaultUser
core/ProjectedVolumeSource.defaultMode
core/ProjectedVolumeSource.defaultUser
core/KeyToPath.mode
core/KeyToPath.user
core/DownwardAPIVolumeFile.mode
core/DownwardAPIVolumeFile.user
core/EmptyDirVolumeSource.mode
core/ConfigMapKeySelector.optional
core/SecretKeySelector.optional
core/ConfigMapEnvSource.optional
core/SecretEnvSource.optional
core/ConfigMapProjection.optional
core/SecretProjection.optional
core/FileKeySelector.optional
core/ClusterTrustBundleProjection.name
core/ClusterTrustBundleProjection.signerName
core/ClusterTrustBundleProjection.optional
core/ClusterTrustBundleProjection.user
core/ServiceAccountTokenProjection.expirationSeconds
core/ServiceAccountTokenProjection.user
core/PodCertificateProjection.maxExpirationSeconds
core/PodCertificateProjection.user
core/PersistentVolumeClaimSpec.storageClassName
core/PersistentVolumeClaimSpec.volumeMode
core/PersistentVolumeClaimSpec.volumeAttributesClassName
core/PersistentVolumeSpec.volumeMode
core/PersistentVolumeSpec.volumeAttributesClassName
core/PersistentVolumeClaimStatus.currentVolumeAttributesClassName
core/CSIVolumeSource.readOnly
core/CSIVolumeSource.fsType
core/AzureDiskVolumeSource.cachingMode
core/AzureDiskVolumeSource.fsType
core/AzureDiskVolumeSource.readOnly
core/AzureDiskVolumeSource.kind
core/FCVolumeSource.lun
core/ISCSIVolumeSource.initiatorName
core/ISCSIPersistentVolumeSource.initiatorName
core/ServiceSpec.ipFamilyPolicy
core/ServiceSpec.allocateLoadBalancerNodePorts
core/ServiceSpec.loadBalancerClass
core/ServiceSpec.internalTrafficPolicy
core/ServiceSpec.trafficDistribution
core/ServicePort.appProtocol
core/EndpointPort.appProtocol
core/EndpointAddress.nodeName
core/ClientIPConfig.timeoutSeconds
core/LoadBalancerIngress.ipMode
core/PortStatus.error
core/ServiceAccount.automountServiceAccountToken
core/ReplicationControllerSpec.replicas
core/Toleration.tolerationSeconds
core/TopologySpreadConstraint.minDomains
core/TopologySpreadConstraint.nodeAffinityPolicy
core/TopologySpreadConstraint.nodeTaintsPolicy
core/PodLogOptions.sinceSeconds
core/PodLogOptions.tailLines
core/PodLogOptions.limitBytes
core/PodLogOptions.stream
core/VolumeMount.mountPropagation
core/VolumeMount.recursiveReadOnly
core/VolumeMountStatus.recursiveReadOnly
core/PodResourceClaim.resourceClaimName
core/PodResourceClaim.resourceClaimTemplateName
core/PodResourceClaimStatus.resourceClaimName
core/PodDNSConfigOption.value
core/NodeFeatures.supplementalGroupsPolicy
core/NodeRuntimeHandlerFeatures.recursiveReadOnlyMounts
core/NodeRuntimeHandlerFeatures.userNamespaces
core/NodeSwapStatus.capacity
core/TypedLocalObjectReference.apiGroup
core/TypedObjectReference.apiGroup
core/TypedObjectReference.namespace

DeploymentSpec.replicas
DeploymentSpec.revisionHistoryLimit
DeploymentSpec.progressDeadlineSeconds
DeploymentStatus.collisionCount
DeploymentStatus.terminatingReplicas
StatefulSetSpec.replicas
StatefulSetSpec.revisionHistoryLimit
StatefulSetStatus.collisionCount
RollingUpdateStatefulSetStrategy.partition
DaemonSetSpec.revisionHistoryLimit
DaemonSetStatus.collisionCount
ReplicaSetSpec.replicas
ReplicaSetStatus.terminatingReplicas

JobSpec.parallelism
JobSpec.completions
JobSpec.activeDeadlineSeconds
JobSpec.backoffLimit
JobSpec.backoffLimitPerIndex
JobSpec.maxFailedIndexes
JobSpec.manualSelector
JobSpec.ttlSecondsAfterFinished
JobSpec.completionMode
JobSpec.suspend
JobSpec.podReplacementPolicy
JobSpec.managedBy
JobStatus.terminating
JobStatus.ready
JobStatus.failedIndexes
CronJobSpec.startingDeadlineSeconds
CronJobSpec.suspend
CronJobSpec.successfulJobsHistoryLimit
CronJobSpec.failedJobsHistoryLimit
CronJobSpec.timeZone
PodFailurePolicyOnExitCodesRequirement.containerName
SuccessPolicyRule.succeededIndexes
SuccessPolicyRule.succeededCount

HorizontalPodAutoscalerSpec.minReplicas
HorizontalPodAutoscalerSpec.targetCPUUtilizationPercentage
HorizontalPodAutoscalerStatus.observedGeneration
HorizontalPodAutoscalerStatus.currentCPUUtilizationPercentage
HPAScalingRules.stabilizationWindowSeconds
HPAScalingRules.selectPolicy
MetricTarget.averageUtilization
MetricValueStatus.averageUtilization
autoscaling/ResourceMetricSource.targetAverageUtilization
autoscaling/ResourceMetricStatus.currentAverageUtilization
autoscaling/ContainerResourceMetricSource.targetAverageUtilization
autoscaling/ContainerResourceMetricStatus.currentAverageUtilization

PodDisruptionBudgetSpec.unhealthyPodEvictionPolicy

IngressSpec.ingressClassName
HTTPIngressPath.pathType
NetworkPolicyPort.protocol
NetworkPolicyPort.endPort
IngressClassParametersReference.apiGroup
IngressClassParametersReference.scope
IngressClassParametersReference.namespace
IngressPortStatus.error

discovery/Endpoint.hostname
discovery/Endpoint.nodeName
discovery/Endpoint.zone
discovery/EndpointConditions.ready
discovery/EndpointConditions.serving
discovery/EndpointConditions.terminating
discovery/EndpointPort.name
discovery/EndpointPort.protocol
discovery/EndpointPort.port
discovery/EndpointPort.appProtocol

StorageClass.reclaimPolicy
StorageClass.allowVolumeExpansion
StorageClass.volumeBindingMode
CSIDriverSpec.attachRequired
CSIDriverSpec.podInfoOnMount
CSIDriverSpec.fsGroupPolicy
CSIDriverSpec.storageCapacity
CSIDriverSpec.requiresRepublish
CSIDriverSpec.seLinuxMount
CSIDriverSpec.nodeAllocatableUpdatePeriodSeconds
CSIDriverSpec.serviceAccountTokenInSecrets
CSIDriverSpec.preventPodSchedulingIfMissing
VolumeAttachmentSource.persistentVolumeName
VolumeNodeResources.count
VolumeError.errorCode
storage/TokenRequest.expirationSeconds

LeaseSpec.holderIdentity
LeaseSpec.leaseDurationSeconds
LeaseSpec.leaseTransitions
LeaseSpec.strategy
LeaseSpec.preferredHolder

PriorityClass.preemptionPolicy

ValidatingWebhook.failurePolicy
ValidatingWebhook.matchPolicy
ValidatingWebhook.sideEffects
ValidatingWebhook.timeoutSeconds
MutatingWebhook.failurePolicy
MutatingWebhook.matchPolicy
MutatingWebhook.sideEffects
MutatingWebhook.timeoutSeconds
MutatingWebhook.reinvocationPolicy
WebhookClientConfig.url
admissionregistration/ServiceReference.path
admissionregistration/ServiceReference.port
admissionregistration/Rule.scope
MatchResources.matchPolicy
ValidatingAdmissionPolicySpec.failurePolicy
MutatingAdmissionPolicySpec.failurePolicy
ParamRef.parameterNotFoundAction
admissionregistration/Validation.reason

LimitedPriorityLevelConfiguration.nominalConcurrencyShares
LimitedPriorityLevelConfiguration.lendablePercent
LimitedPriorityLevelConfiguration.borrowingLimitPercent
ExemptPriorityLevelConfiguration.nominalConcurrencyShares
ExemptPriorityLevelConfiguration.lendablePercent

TokenRequestSpec.expirationSeconds
CertificateSigningRequestSpec.expirationSeconds
CertificateSigningRequestSpec.signerName
"""

# Go fields without `omitempty` that the OpenAPI document does not mark
# required (they carry `+optional`), so kube writes their zero values: with
# protobuf in etcd (issue 20) a stored zero must read back as kube serves
# it. Listed from kubernetes/api's types.go: singular scalar fields tagged
# `+optional` whose json tag has no `omitempty` (kinds kube stores).
NOT_OMITEMPTY = """
policy/PodDisruptionBudgetStatus.disruptionsAllowed
policy/PodDisruptionBudgetStatus.currentHealthy
policy/PodDisruptionBudgetStatus.desiredHealthy
policy/PodDisruptionBudgetStatus.expectedPods
apps/StatefulSetOrdinals.start
apps/StatefulSetSpec.serviceName
apps/StatefulSetStatus.availableReplicas
apps/ControllerRevision.revision
apps/ScaleStatus.replicas
apps/StatefulSetCondition.type
apps/StatefulSetCondition.status
apps/DeploymentCondition.type
apps/DeploymentCondition.status
apps/DaemonSetCondition.type
apps/DaemonSetCondition.status
apps/ReplicaSetCondition.type
apps/ReplicaSetCondition.status
core/Event.reportingComponent
core/Event.reportingInstance
core/NodeRuntimeHandler.name
batch/PodFailurePolicyOnPodConditionsPattern.status
flowcontrol/FlowSchemaSpec.matchingPrecedence
flowcontrol/QueuingConfiguration.queues
flowcontrol/QueuingConfiguration.handSize
flowcontrol/QueuingConfiguration.queueLengthLimit
rbac/RoleRef.apiGroup
scheduling/PriorityClass.value
certificates/CertificateSigningRequestCondition.status
"""

# Deliberate deviation from kube's JSON: `ScaleSpec.replicas` is a plain
# `omitempty` field in Go, so kube writes `"spec": {}` for a scale to zero.
# Keeping the explicit 0 makes "scale to zero" unambiguous for a server that
# reads the JSON.
KEEP_ZERO_EXTRA = """
ScaleSpec.replicas
"""

MESSAGE_RE = re.compile(r"^message\s+(\w+)\s*\{$")
FIELD_RE = re.compile(
    r"^(optional|repeated|required)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+)\s*;$"
)
MAP_RE = re.compile(
    r"^map\s*<\s*(\w+)\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+)\s*;$"
)
PACKAGE_RE = re.compile(r"^package\s+([\w.]+)\s*;$")


def strip_comments(text):
    """Drop // and /* */ comments (the IDL has no string literals that hold them)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                fail("unterminated block comment")
            out.append("\n" * text.count("\n", i, j))
            i = j + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def fail(msg):
    sys.stderr.write("gen_proto: %s\n" % msg)
    sys.exit(1)


def parse_file(path):
    """Return (package, [(message, [field dicts])]) of one proto2 file."""
    package = None
    messages = []
    current = None
    for raw in strip_comments(open(path, encoding="utf-8").read()).splitlines():
        line = raw.strip()
        if not line:
            continue
        m = PACKAGE_RE.match(line)
        if m:
            package = m.group(1)
            continue
        if re.match(r"^(syntax|import|option)\b", line):
            continue
        m = MESSAGE_RE.match(line)
        if m:
            if current is not None:
                fail("%s: nested message %s" % (path, m.group(1)))
            current = (m.group(1), [])
            continue
        if line == "}":
            if current is None:
                fail("%s: unbalanced }" % path)
            messages.append(current)
            current = None
            continue
        if current is None:
            fail("%s: unexpected line outside a message: %s" % (path, line))
        m = FIELD_RE.match(line)
        if m:
            label, typ, name, num = m.groups()
            if label == "required":
                label = "optional"
            current[1].append(
                {"n": int(num), "proto": name, "type": typ, "label": label}
            )
            continue
        m = MAP_RE.match(line)
        if m:
            key, value, name, num = m.groups()
            current[1].append(
                {"n": int(num), "proto": name, "type": "map",
                 "label": "repeated", "key": key, "value": value}
            )
            continue
        fail("%s: unsupported line: %s" % (path, line))
    if current is not None:
        fail("%s: unterminated message %s" % (path, current[0]))
    if package is None:
        fail("%s: no package" % path)
    return package, messages


def resolve(typ, package, known):
    if typ in SCALARS:
        return typ
    if typ.startswith("."):
        name = typ[1:]
    else:
        # proto scoping: innermost package first, then outwards.
        parts = package.split(".")
        name = None
        for i in range(len(parts), -1, -1):
            cand = ".".join(parts[:i] + [typ])
            if cand in known:
                name = cand
                break
        if name is None:
            fail("cannot resolve type %s in %s" % (typ, package))
    if name not in known:
        fail("unknown message type %s" % name)
    return name


def definition_name(message):
    # k8s.io.api.core.v1.Pod -> io.k8s.api.core.v1.Pod
    return "io.k8s." + message[len("k8s.io."):]


def short_package(message):
    """k8s.io.api.apps.v1.X -> apps; k8s.io.apimachinery.pkg.apis.meta.v1.X -> meta."""
    parts = message.split(".")
    if parts[:3] == ["k8s", "io", "api"]:
        return parts[3]
    if parts[:5] == ["k8s", "io", "apimachinery", "pkg", "apis"]:
        return parts[5]
    return None


def parse_field_list(text):
    out = []
    for line in text.split():
        if "/" in line:
            pkg, rest = line.split("/", 1)
        else:
            pkg, rest = None, line
        msg, field = rest.split(".", 1)
        out.append((pkg, msg, field))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("proto_root", nargs="?", default=DEFAULT_PROTO_ROOT)
    ap.add_argument("--openapi", default=DEFAULT_OPENAPI)
    ap.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    files = []
    for dirpath, _, names in os.walk(args.proto_root):
        for n in names:
            if n == "generated.proto":
                files.append(os.path.join(dirpath, n))
    files.sort()
    if not files:
        fail("no generated.proto below %s" % args.proto_root)

    raw = {}  # full message name -> (package, fields)
    for path in files:
        package, messages = parse_file(path)
        for name, fields in messages:
            full = package + "." + name
            if full in raw:
                fail("duplicate message %s" % full)
            raw[full] = (package, fields)

    for full, (package, fields) in raw.items():
        seen = set()
        for f in fields:
            if f["n"] in seen:
                fail("%s: duplicate field number %d" % (full, f["n"]))
            seen.add(f["n"])
            if f["type"] == "map":
                f["key"] = resolve(f["key"], package, raw)
                f["value"] = resolve(f["value"], package, raw)
                if f["key"] not in SCALARS:
                    fail("%s.%s: map key must be scalar" % (full, f["proto"]))
            else:
                f["type"] = resolve(f["type"], package, raw)

    definitions = {}
    if args.openapi and os.path.exists(args.openapi):
        definitions = json.load(open(args.openapi, encoding="utf-8"))["definitions"]

    # JSON names and inlining, from the OpenAPI definition of the same type.
    facts = {}  # (full, proto name) -> {"name": ..., "inline": bool}
    for full, (package, fields) in raw.items():
        d = definitions.get(definition_name(full))
        if d is None:
            continue
        props = d.get("properties", {})
        for f in fields:
            p = f["proto"]
            if p in props:
                continue
            ci = [k for k in props if k.lower() == p.lower()]
            if len(ci) == 1:
                facts[(full, p)] = {"name": ci[0]}
                continue
            if f["type"] in raw and f["label"] == "optional":
                child = [c["proto"] for c in raw[f["type"]][1]]
                hits = sum(1 for c in child if c in props)
                if child and hits * 2 >= len(child) and hits > 0:
                    facts[(full, p)] = {"inline": True}
    # Carry facts to the same message in other versions that have no
    # OpenAPI definition (older or alpha versions).
    # Same group first, then any group (extensions/v1beta1 holds copies of
    # types that later moved to apps and networking).
    by_group, by_name = {}, {}
    for (full, p), fact in sorted(facts.items()):
        short = full.rsplit(".", 1)[1]
        by_group.setdefault((short_package(full), short, p), fact)
        by_name.setdefault((short, p), fact)
    for full, (package, fields) in raw.items():
        if definition_name(full) in definitions:
            continue
        short = full.rsplit(".", 1)[1]
        for f in fields:
            fact = by_group.get((short_package(full), short, f["proto"]))
            if fact is None:
                fact = by_name.get((short, f["proto"]))
            if fact is not None:
                facts[(full, f["proto"])] = fact

    for full, (package, fields) in raw.items():
        d = definitions.get(definition_name(full), {})
        required = set(d.get("required", []))
        for f in fields:
            fact = facts.get((full, f["proto"]), {})
            f["name"] = fact.get("name", f["proto"])
            if fact.get("inline"):
                f["inline"] = True
            if (f["name"] in required and f["label"] == "optional"
                    and f["type"] in SCALARS):
                f["keepZero"] = True

    def apply_list(text, what):
        for pkg, msg, field in parse_field_list(text):
            hits = 0
            for full, (package, fields) in raw.items():
                if full.rsplit(".", 1)[1] != msg:
                    continue
                if pkg is not None and short_package(full) != pkg:
                    continue
                for f in fields:
                    if f["name"] == field:
                        if f["type"] not in SCALARS or f["label"] != "optional":
                            fail("%s %s.%s is not a singular scalar" % (what, msg, field))
                        f["keepZero"] = True
                        hits += 1
            if hits == 0:
                fail("%s entry %s/%s.%s matches no field" % (what, pkg, msg, field))

    apply_list(POINTER_FIELDS, "POINTER_FIELDS")
    apply_list(KEEP_ZERO_EXTRA, "KEEP_ZERO_EXTRA")
    apply_list(NOT_OMITEMPTY, "NOT_OMITEMPTY")

    # group -> package short name, from the kinds the OpenAPI document lists.
    groups = {}
    for dname, d in definitions.items():
        if not dname.startswith("io.k8s.api."):
            continue
        short = dname.split(".")[3]
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            g = gvk.get("group", "")
            prev = groups.setdefault(g, short)
            if prev != short:
                fail("group %r maps to both %s and %s" % (g, prev, short))
    for g, short in EXTRA_GROUPS.items():
        groups.setdefault(g, short)
    present = {short_package(m) for m in raw}
    groups = {g: s for g, s in groups.items() if s in present}

    out_messages = {}
    for full in sorted(raw):
        out_fields = []
        for f in raw[full][1]:
            o = {"n": f["n"], "name": f["name"], "type": f["type"], "label": f["label"]}
            for k in ("key", "value", "keepZero", "inline"):
                if k in f:
                    o[k] = f[k]
            out_fields.append(o)
        out_messages[full] = out_fields

    doc = {"groups": groups, "messages": out_messages}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"

    if args.check:
        try:
            current = open(args.output, encoding="utf-8").read()
        except OSError:
            current = None
        if current != text:
            sys.stderr.write("gen_proto: %s is out of date\n" % args.output)
            return 1
        return 0
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        fh.write(text)
    sys.stderr.write(
        "gen_proto: %d messages, %d groups -> %s\n"
        % (len(out_messages), len(groups), args.output)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
