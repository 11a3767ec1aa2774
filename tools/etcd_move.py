#!/usr/bin/env python3
"""Move a resource's keys from one etcd cluster to another, byte for byte.

The step between "stop writes" and "switch --etcd-servers-overrides" when a
resource moves to (or off) an etcd cluster of its own (README: "Resources
on their own etcd clusters", "Moving a resource"):

  1. read every key under the resource's prefix on the source at one
     revision (paged);
  2. write them to the target with their values unchanged (protobuf, JSON
     or encrypted values alike: encryption at rest binds a value to its
     key, and keys are kept), refusing keys the target already has unless
     --overwrite; keys attached to a lease (Events' TTL) get a lease on the
     target with the TTL the source lease has left, one target lease per
     source lease;
  3. verify: read both sides and compare every key, value and lease
     attachment; print the counts; exit 1 on any difference;
  4. with --delete-source, delete the source range once verified (only if
     no key in it changed since the copy).

It talks to etcd's JSON gateway (POST /v3/kv/range, /v3/kv/txn,
/v3/lease/grant, /v3/lease/timetolive; etcd >= 3.4, on the client URL), so
it needs nothing but Python 3's standard library.

Keys keep their names, so source and target must be read by servers with
the same --etcd-prefix. resourceVersions are etcd revisions: the moved
objects get the target's revisions, and clients relist (their watches end
with 410 Gone), as with kube-apiserver.

Exit status: 0 done (and verified); 1 verify found differences, or the
source changed before --delete-source; 2 usage; 3 refused (the target
already holds keys under the prefix, or source and target are one
cluster); 4 an etcd request failed.
"""

import argparse
import base64
import json
import ssl
import sys
import urllib.error
import urllib.request

# The key segment of each built-in resource this server stores, as
# apiserver/src/storage_format.rs's `segment` derives it (kube's
# DefaultStorageFactory resource prefixes). A group/resource not listed is
# a custom resource's, kept under `<group>/<resource>`. The apiserver unit
# test `etcd_move_tool_maps_resources_as_the_server_does` checks this table
# against the server's registry.
BUILTIN = {
    "": "configmaps endpoints events limitranges namespaces nodes "
    "persistentvolumeclaims persistentvolumes pods podtemplates "
    "replicationcontrollers resourcequotas secrets serviceaccounts services",
    "admissionregistration.k8s.io": "mutatingadmissionpolicies "
    "mutatingadmissionpolicybindings mutatingwebhookconfigurations "
    "validatingadmissionpolicies validatingadmissionpolicybindings "
    "validatingwebhookconfigurations",
    "apiextensions.k8s.io": "customresourcedefinitions",
    "apiregistration.k8s.io": "apiservices",
    "apps": "controllerrevisions daemonsets deployments replicasets statefulsets",
    "autoscaling": "horizontalpodautoscalers",
    "batch": "cronjobs jobs",
    "certificates.k8s.io": "certificatesigningrequests",
    "coordination.k8s.io": "leases",
    "discovery.k8s.io": "endpointslices",
    "events.k8s.io": "events",
    "flowcontrol.apiserver.k8s.io": "flowschemas prioritylevelconfigurations",
    "networking.k8s.io": "ingressclasses ingresses ipaddresses networkpolicies servicecidrs",
    "node.k8s.io": "runtimeclasses",
    "policy": "poddisruptionbudgets",
    "rbac.authorization.k8s.io": "clusterrolebindings clusterroles rolebindings roles",
    "resource.k8s.io": "deviceclasses resourceclaims resourceclaimtemplates resourceslices",
    "scheduling.k8s.io": "priorityclasses",
    "storage.k8s.io": "csidrivers csinodes csistoragecapacities storageclasses "
    "volumeattachments volumeattributesclasses",
}

# kube's SpecialDefaultResourcePrefixes: built-in resources kept under a
# path other than their name.
SPECIAL = {
    ("", "replicationcontrollers"): "controllers",
    ("", "endpoints"): "services/endpoints",
    ("", "nodes"): "minions",
    ("", "services"): "services/specs",
    ("networking.k8s.io", "ingresses"): "ingress",
}

# Groups kube serves from its apiextensions and aggregator servers, which
# key their resources as <group>/<resource>.
GROUP_QUALIFIED = {"apiextensions.k8s.io", "apiregistration.k8s.io"}

# etcd's default --max-txn-ops is 128 and its default request limit 1.5 MiB:
# a copy transaction stays under both.
TXN_KEYS = 100
TXN_BYTES = 1 << 20
PAGE = 500

EXIT_DIFFERENT, EXIT_USAGE, EXIT_REFUSED, EXIT_ETCD = 1, 2, 3, 4


class Fail(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def segment(group, resource):
    """The key segment of group/resource under --etcd-prefix."""
    if resource in BUILTIN.get(group, "").split():
        special = SPECIAL.get((group, resource))
        if special:
            return special
        return f"{group}/{resource}" if group in GROUP_QUALIFIED else resource
    return f"{group}/{resource}" if group else resource


def resource_prefix(etcd_prefix, spec):
    """`group/resource` (core group empty: `/events`) → its key prefix."""
    if spec.count("/") != 1:
        raise Fail(EXIT_USAGE, f"--resource {spec!r}: expected group/resource (core: /events)")
    group, resource = spec.split("/")
    if not resource:
        raise Fail(EXIT_USAGE, f"--resource {spec!r}: no resource named")
    return f"{etcd_prefix.rstrip('/')}/{segment(group, resource)}/"


def b64(data):
    return base64.b64encode(data).decode()


def unb64(text):
    return base64.b64decode(text or "")


def range_end(prefix):
    """The first key after every key starting with `prefix`."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


def show(key):
    return key.decode("utf-8", "backslashreplace")


class Etcd:
    """One etcd cluster through its JSON gateway (first endpoint that answers)."""

    def __init__(self, name, endpoints, cacert, cert, key, timeout):
        self.name = name
        self.endpoints = [e.strip().rstrip("/") for e in endpoints.split(",") if e.strip()]
        if not self.endpoints:
            raise Fail(EXIT_USAGE, f"--{name}: no endpoint")
        self.timeout = timeout
        self.context = None
        if any(e.startswith("https://") for e in self.endpoints):
            self.context = ssl.create_default_context(cafile=cacert)
            if cert:
                self.context.load_cert_chain(cert, key)

    def call(self, path, body):
        data = json.dumps(body).encode()
        errors = []
        for endpoint in self.endpoints:
            request = urllib.request.Request(
                endpoint + path, data=data, headers={"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(
                    request, timeout=self.timeout, context=self.context
                ) as response:
                    return json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as e:
                # etcd answered: an error of the request, not of the endpoint.
                detail = e.read().decode("utf-8", "replace")
                raise Fail(EXIT_ETCD, f"{self.name} {endpoint}{path}: {e.code} {detail}")
            except (OSError, ValueError) as e:
                errors.append(f"{endpoint}: {e}")
        raise Fail(EXIT_ETCD, f"{self.name}: no endpoint answered {path}: " + "; ".join(errors))

    def cluster_id(self):
        return self.call("/v3/kv/range", {"key": b64(b"\0"), "count_only": True})["header"][
            "cluster_id"
        ]

    def scan(self, prefix, revision=0):
        """(revision, [kv]) of every key under `prefix`, read at one revision
        (the current one when 0), PAGE keys a request."""
        start, end, kvs = prefix, range_end(prefix), []
        while True:
            body = {"key": b64(start), "range_end": b64(end), "limit": PAGE}
            if revision:
                body["revision"] = revision
            reply = self.call("/v3/kv/range", body)
            if not revision:
                revision = int(reply["header"]["revision"])
            page = reply.get("kvs", [])
            for kv in page:
                kvs.append(
                    {
                        "key": unb64(kv["key"]),
                        "value": unb64(kv.get("value")),
                        "lease": int(kv.get("lease", 0)),
                        "mod_revision": int(kv.get("mod_revision", 0)),
                    }
                )
            if not reply.get("more") or not page:
                return revision, kvs
            start = kvs[-1]["key"] + b"\0"

    def count(self, prefix):
        reply = self.call(
            "/v3/kv/range",
            {"key": b64(prefix), "range_end": b64(range_end(prefix)), "count_only": True},
        )
        return int(reply.get("count", 0))

    def ttl(self, lease):
        """Seconds `lease` has left, or None when it has expired."""
        reply = self.call("/v3/lease/timetolive", {"ID": lease})
        left = int(reply.get("TTL", -1))
        return left if left > 0 else None

    def grant(self, ttl):
        return int(self.call("/v3/lease/grant", {"TTL": ttl})["ID"])

    def txn(self, compare, success):
        reply = self.call("/v3/kv/txn", {"compare": compare, "success": success})
        return bool(reply.get("succeeded"))


def batches(kvs):
    batch, size = [], 0
    for kv in kvs:
        weight = len(kv["key"]) + len(kv["value"])
        if batch and (len(batch) == TXN_KEYS or size + weight > TXN_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(kv)
        size += weight
    if batch:
        yield batch


def copy(source, target, prefix, args, out):
    """Copies `prefix`; returns the source revision it was read at."""
    revision, kvs = source.scan(prefix)
    size = sum(len(kv["value"]) for kv in kvs)
    leases = sorted({kv["lease"] for kv in kvs if kv["lease"]})
    print(
        f"{show(prefix)}: {len(kvs)} keys ({size} bytes, {len(leases)} leases) "
        f"on the source at revision {revision}",
        file=out,
    )
    existing = target.count(prefix)
    if existing and not args.overwrite:
        raise Fail(
            EXIT_REFUSED,
            f"{show(prefix)}: the target already holds {existing} keys under the prefix; "
            "nothing written (--overwrite replaces the target's range with the source's)",
        )
    ttls = {lease: source.ttl(lease) for lease in leases}
    expired = {lease for lease, left in ttls.items() if left is None}
    if args.dry_run:
        for kv in kvs:
            lease = kv["lease"]
            note = ""
            if lease:
                note = " (lease expired: skipped)" if lease in expired else f" (ttl {ttls[lease]}s)"
            print(f"  would copy {show(kv['key'])} {len(kv['value'])} bytes{note}", file=out)
        if existing:
            print(f"  would replace {existing} keys the target holds", file=out)
        return revision
    # The source's lease ran out meanwhile: its keys are gone there too.
    kvs = [kv for kv in kvs if kv["lease"] not in expired]
    granted = {lease: target.grant(ttls[lease]) for lease in leases if lease not in expired}
    if existing:
        wanted = {kv["key"] for kv in kvs}
        _, present = target.scan(prefix)
        stale = [kv for kv in present if kv["key"] not in wanted]
        for batch in batches(stale):
            target.txn([], [{"request_delete_range": {"key": b64(kv["key"])}} for kv in batch])
    for batch in batches(kvs):
        puts = []
        for kv in batch:
            put = {"key": b64(kv["key"]), "value": b64(kv["value"])}
            if kv["lease"]:
                put["lease"] = granted[kv["lease"]]
            puts.append({"request_put": put})
        # Without --overwrite each key must still be absent (a writer that
        # raced the check loses nothing).
        absent = []
        if not args.overwrite:
            absent = [
                {"key": b64(kv["key"]), "target": "CREATE", "result": "EQUAL", "create_revision": 0}
                for kv in batch
            ]
        if not target.txn(absent, puts):
            raise Fail(
                EXIT_REFUSED,
                f"{show(prefix)}: a key appeared on the target during the copy "
                f"(near {show(batch[0]['key'])}); stop every writer and run again with --overwrite",
            )
    skipped = f", {len(expired)} expired leases skipped" if expired else ""
    print(
        f"{show(prefix)}: copied {len(kvs)} keys, {len(granted)} leases granted{skipped}",
        file=out,
    )
    return revision


def verify(source, target, prefix, out):
    """Compares both sides; returns the number of differences."""
    _, left = source.scan(prefix)
    _, right = target.scan(prefix)
    theirs = {kv["key"]: kv for kv in right}
    differences = 0
    for kv in left:
        other = theirs.pop(kv["key"], None)
        if other is None:
            print(f"  missing on the target: {show(kv['key'])}", file=out)
        elif other["value"] != kv["value"]:
            print(f"  value differs: {show(kv['key'])}", file=out)
        elif bool(other["lease"]) != bool(kv["lease"]):
            print(f"  lease attachment differs: {show(kv['key'])}", file=out)
        else:
            continue
        differences += 1
    for key in theirs:
        print(f"  only on the target: {show(key)}", file=out)
        differences += 1
    size = sum(len(kv["value"]) for kv in left)
    verdict = "identical" if not differences else f"{differences} differences"
    print(
        f"{show(prefix)}: verify: source {len(left)} keys ({size} bytes), "
        f"target {len(right)} keys: {verdict}",
        file=out,
    )
    return differences


def delete_source(source, prefix, revision, out):
    """Deletes the source range if nothing in it changed after `revision`."""
    key, end = b64(prefix), b64(range_end(prefix))
    unchanged = {
        "key": key,
        "range_end": end,
        "target": "MOD",
        "result": "LESS",
        "mod_revision": revision + 1,
    }
    if not source.txn([unchanged], [{"request_delete_range": {"key": key, "range_end": end}}]):
        raise Fail(
            EXIT_DIFFERENT,
            f"{show(prefix)}: the source changed after revision {revision}; not deleted",
        )
    print(f"{show(prefix)}: deleted from the source", file=out)


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="etcd_move.py",
        description=(
            "Copy every key under a resource's prefix from one etcd cluster to\n"
            "another with its value byte for byte (and its lease's remaining TTL),\n"
            "then verify both sides are identical. Stop writes to the resource\n"
            "first (README: 'Moving a resource'). Keys keep their names, so both\n"
            "sides serve the same --etcd-prefix; moved objects get the target's\n"
            "revisions as resourceVersions, and clients relist."
        ),
        epilog=(
            "examples:\n"
            "  etcd_move.py --source http://main:2379 --target http://events:2379 --resource /events\n"
            "  etcd_move.py --source ... --target ... --resource example.com/widgets --dry-run\n"
            "  etcd_move.py --source ... --target ... --prefix /registry/leases/ --verify-only\n"
            "  etcd_move.py --print-prefix --resource /services --resource apps/deployments\n"
            "exit status: 0 copied and verified; 1 differences (or the source changed\n"
            "before --delete-source); 2 usage; 3 refused (keys on the target, or one\n"
            "cluster on both sides); 4 an etcd request failed"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--source", help="source etcd client URLs, comma separated")
    parser.add_argument("--target", help="target etcd client URLs, comma separated")
    parser.add_argument(
        "--resource",
        action="append",
        default=[],
        metavar="GROUP/RESOURCE",
        help="a resource as --etcd-servers-overrides names it (/events, "
        "coordination.k8s.io/leases, example.com/widgets); repeatable",
    )
    parser.add_argument(
        "--prefix",
        action="append",
        default=[],
        metavar="KEY_PREFIX",
        help="a raw key prefix (/registry/events/); repeatable",
    )
    parser.add_argument(
        "--etcd-prefix", default="/registry", help="the servers' --etcd-prefix (default /registry)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace what the target holds under the prefix (keys absent from "
        "the source are deleted there); without it, any key there refuses the copy",
    )
    parser.add_argument("--dry-run", action="store_true", help="list what would be copied; write nothing")
    parser.add_argument("--verify-only", action="store_true", help="only compare both sides")
    parser.add_argument(
        "--delete-source",
        action="store_true",
        help="after a successful verify, delete the range on the source "
        "(refused if any key in it changed since the copy)",
    )
    parser.add_argument(
        "--print-prefix", action="store_true", help="print each resource's key prefix and exit"
    )
    parser.add_argument("--cacert", help="CA bundle for https endpoints (both sides)")
    parser.add_argument("--cert", help="client certificate (PEM, both sides)")
    parser.add_argument("--key", help="client key (PEM, both sides)")
    for side in ("source", "target"):
        for what in ("cacert", "cert", "key"):
            parser.add_argument(f"--{side}-{what}", help=f"--{what} for the {side} only")
    parser.add_argument("--timeout", type=float, default=30, help="seconds per etcd request (30)")
    args = parser.parse_args(argv)
    if not args.resource and not args.prefix:
        parser.error("name what to move: --resource GROUP/RESOURCE or --prefix KEY_PREFIX")
    if not args.print_prefix and not (args.source and args.target):
        parser.error("--source and --target are required")
    if args.delete_source and (args.dry_run or args.verify_only):
        parser.error("--delete-source copies first: not with --dry-run or --verify-only")
    return args


def run(args, out):
    prefixes = [resource_prefix(args.etcd_prefix, r) for r in args.resource]
    for p in args.prefix:
        if not p.endswith("/"):
            raise Fail(EXIT_USAGE, f"--prefix {p!r}: a key prefix ends with '/'")
        prefixes.append(p)
    if args.print_prefix:
        for p in prefixes:
            print(p, file=out)
        return 0
    prefixes = [p.encode() for p in prefixes]

    def side(name):
        pick = lambda what: getattr(args, f"{name}_{what}") or getattr(args, what)  # noqa: E731
        return Etcd(
            name, getattr(args, name), pick("cacert"), pick("cert"), pick("key"), args.timeout
        )

    source, target = side("source"), side("target")
    if source.cluster_id() == target.cluster_id():
        raise Fail(EXIT_REFUSED, "the source and the target are the same etcd cluster")
    differences = 0
    for prefix in prefixes:
        revision = None
        if not args.verify_only:
            revision = copy(source, target, prefix, args, out)
        if args.dry_run:
            continue
        found = verify(source, target, prefix, out)
        differences += found
        if args.delete_source and not found:
            delete_source(source, prefix, revision, out)
    return EXIT_DIFFERENT if differences else 0


def main(argv=None):
    args = parse(argv)
    try:
        return run(args, sys.stdout)
    except Fail as e:
        print(f"etcd_move: {e}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
