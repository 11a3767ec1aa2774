// A small operator on @kubernetes/client-node for tests/tests/operator_node.rs
// (issue 33), run as `node operator.mjs IDENTITY` with KUBECONFIG pointing at
// the load balancer in front of two replicas.
//
// - An informer (client-node's ListWatch, as makeInformer builds it, with a
//   Watch that asks for bookmarks) keeps the ConfigMaps labelled
//   `ops.example.com/input=true` of the namespace `ops-node`.
// - A loop elected on the Lease `ops-node/node-operator` (acquire and renew
//   as client-go's leaderelection does it, with CoordinationV1Api:
//   client-node has no helper) annotates each such ConfigMap with
//   `ops.example.com/handled-by: IDENTITY` while this process leads.
//
// One line per happening on stdout: `leading`, `following`, `handled NAME`,
// `listed N`, `bookmark RV`, `error ...`.

import {
  CoordinationV1Api,
  CoreV1Api,
  KubeConfig,
  ListWatch,
  PatchStrategy,
  V1MicroTime,
  Watch,
  setHeaderOptions,
} from '@kubernetes/client-node';

const NAMESPACE = 'ops-node';
const LEASE = 'node-operator';
const SELECTOR = 'ops.example.com/input=true';
const ANNOTATION = 'ops.example.com/handled-by';
// client-go's defaults scaled down for a test: a lease of 4 s, renewed
// every second, given up when it could not be renewed for 3 s.
const LEASE_SECONDS = 4;
const RETRY_MS = 1000;
const RENEW_DEADLINE_MS = 3000;

const identity = process.argv[2];
if (!identity) {
  console.error('usage: node operator.mjs IDENTITY');
  process.exit(2);
}
const log = (line) => console.log(line);

const kc = new KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(CoreV1Api);
const coordination = kc.makeApiClient(CoordinationV1Api);

// A Watch that asks the server for bookmarks (makeInformer's plain Watch
// does not), so a resumed watch starts from the newest revision seen.
class BookmarkWatch extends Watch {
  watch(path, query, callback, done) {
    const withBookmarks = { ...query, allowWatchBookmarks: true };
    const seen = (phase, obj, raw) => {
      if (phase === 'BOOKMARK') log(`bookmark ${obj?.metadata?.resourceVersion}`);
      callback(phase, obj, raw);
    };
    return super.watch(path, withBookmarks, seen, done);
  }
}

const path = `/api/v1/namespaces/${NAMESPACE}/configmaps`;
const listFn = async () => {
  const list = await core.listNamespacedConfigMap({ namespace: NAMESPACE, labelSelector: SELECTOR });
  log(`listed ${list.items.length}`);
  return list;
};
const informer = new ListWatch(path, new BookmarkWatch(kc), listFn, false, SELECTOR);

let leading = false;

async function handle(cm) {
  if (!leading) return;
  const name = cm.metadata.name;
  if (cm.metadata.annotations?.[ANNOTATION]) return;
  try {
    await core.patchNamespacedConfigMap(
      { name, namespace: NAMESPACE, body: { metadata: { annotations: { [ANNOTATION]: identity } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    log(`handled ${name}`);
  } catch (e) {
    // The next sweep of the leader loop tries again.
    log(`error patching ${name}: ${e.code ?? e.message}`);
  }
}

informer.on('add', handle);
informer.on('update', handle);
informer.on('error', (err) => {
  // A failed watch (or list) ends the ListWatch: start it again. It keeps
  // its resourceVersion, so it watches again without a list unless the
  // server said 410.
  log(`error informer: ${err?.statusCode ?? err?.code ?? err?.message ?? err}`);
  setTimeout(() => informer.start().catch((e) => log(`error restart: ${e.message}`)), 500);
});

// One round of client-go's tryAcquireOrRenew: true when this process holds
// the lease afterwards. A lost race (409) or a failed request is false or
// an exception, and the caller goes on.
async function tryAcquireOrRenew() {
  // A Lease's times are MicroTimes, which kube-apiserver parses with six
  // fractional digits only: client-node's V1MicroTime writes them so (a
  // plain Date's three are refused with 400).
  const now = new V1MicroTime();
  let lease;
  try {
    lease = await coordination.readNamespacedLease({ name: LEASE, namespace: NAMESPACE });
  } catch (e) {
    if (e.code !== 404) throw e;
    await coordination.createNamespacedLease({
      namespace: NAMESPACE,
      body: {
        metadata: { name: LEASE, namespace: NAMESPACE },
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: LEASE_SECONDS,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: 0,
        },
      },
    });
    return true;
  }
  const spec = lease.spec ?? {};
  const holder = spec.holderIdentity;
  const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
  const duration = (spec.leaseDurationSeconds ?? LEASE_SECONDS) * 1000;
  if (holder && holder !== identity && renewed + duration > now.getTime()) {
    return false;
  }
  const mine = holder === identity;
  lease.spec = {
    ...spec,
    holderIdentity: identity,
    leaseDurationSeconds: LEASE_SECONDS,
    renewTime: now,
    acquireTime: mine ? spec.acquireTime : now,
    leaseTransitions: (spec.leaseTransitions ?? 0) + (mine ? 0 : 1),
  };
  // The resourceVersion read above makes this a compare-and-swap: of two
  // candidates, one gets 409.
  await coordination.replaceNamespacedLease({ name: LEASE, namespace: NAMESPACE, body: lease });
  return true;
}

let lastRenew = 0;
async function electionRound() {
  let held = false;
  try {
    held = await tryAcquireOrRenew();
    if (held) lastRenew = Date.now();
  } catch (e) {
    log(`error lease: ${e.code ?? e.message} ${e.body ?? ""}`);
    // A leader that cannot renew keeps leading until its deadline.
    held = leading && Date.now() - lastRenew < RENEW_DEADLINE_MS;
  }
  if (held !== leading) {
    leading = held;
    log(leading ? 'leading' : 'following');
  }
  if (leading) {
    for (const cm of informer.list(NAMESPACE)) await handle(cm);
  }
}

async function main() {
  await informer.start();
  for (;;) {
    await electionRound();
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

main().catch((e) => {
  console.error(`fatal: ${e.stack ?? e}`);
  process.exit(1);
});
