import net from 'node:net';
import { CoreV1Api, makeInformer, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { Controller, objectKey, splitKey } from '../../operator/src/k8s/controller.js';
import { freshNamespace, kubeConfig } from './support/kube.js';

/**
 * A TCP relay in front of the API server that the test can cut, to fail every open watch
 * the way a network blip or an API server restart does (TLS passes through untouched).
 */
async function cuttableRelay(target: URL): Promise<{ url: string; cut(): void; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    cut: () => sockets.forEach((socket) => socket.destroy()),
    close: () => {
      sockets.forEach((socket) => socket.destroy());
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const quietLog = { info: () => {}, warn: () => {} };
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

function configMapController(config: KubeConfig, namespace: string, reconcile: (key: string) => Promise<void>, resyncMs = 300_000) {
  const core = config.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1ConfigMap>(config, `/api/v1/namespaces/${namespace}/configmaps`, () => core.listNamespacedConfigMap({ namespace }));
  const controller = new Controller({
    name: 'test',
    sources: [{ name: 'configmaps', informer, keysOf: (object) => [objectKey(object)] }],
    reconcile,
    workers: 2,
    resyncMs,
    log: quietLog,
    watchBackoffMs: { initial: 200, max: 1_000 },
  });
  const stop = new AbortController();
  const running = controller.run(stop.signal);
  stops.push(async () => {
    stop.abort();
    await running;
  });
  return { controller, informer };
}

describe('controller on a real API server', () => {
  it('reconciles what exists at start and what is created, changed and deleted later', async () => {
    const namespace = await freshNamespace('ctl');
    const core = kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'before' }, data: { v: '1' } } });
    const seen: string[] = [];
    configMapController(kubeConfig(), namespace, (key) => {
      seen.push(key);
      return Promise.resolve();
    });
    await expect.poll(() => seen.includes(`${namespace}/before`), { timeout: 20_000, interval: 100, message: 'the object that existed at start' }).toBe(true);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'after' }, data: { v: '1' } } });
    await expect.poll(() => seen.includes(`${namespace}/after`), { timeout: 20_000, interval: 100, message: 'a created object' }).toBe(true);
    const count = seen.length;
    await core.deleteNamespacedConfigMap({ namespace, name: 'after' });
    await expect.poll(() => seen.length > count && seen.at(-1) === `${namespace}/after`, { timeout: 20_000, interval: 100, message: 'a deleted object' }).toBe(true);
  });

  it('merges a burst of changes to one object into few reconciles that see the last state', async () => {
    const namespace = await freshNamespace('ctl');
    const core = kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'hot' }, data: { v: '0' } } });
    let reconciles = 0;
    let lastSeen = '';
    const { informer } = configMapController(kubeConfig(), namespace, async (key) => {
      reconciles++;
      // Level-triggered: read the current state, here from the cache, not from the event.
      lastSeen = informer.get(splitKey(key).name, namespace)?.data?.v ?? '';
      await new Promise((resolve) => setTimeout(resolve, 300));
    });
    await expect.poll(() => reconciles >= 1, { timeout: 20_000, interval: 100, message: 'the first reconcile' }).toBe(true);
    for (let v = 1; v <= 30; v++) {
      await core.replaceNamespacedConfigMap({ namespace, name: 'hot', body: { metadata: { name: 'hot' }, data: { v: String(v) } } });
    }
    await expect.poll(() => lastSeen === '30', { timeout: 20_000, interval: 100, message: 'a reconcile that saw the last change' }).toBe(true);
    expect(reconciles).toBeLessThan(20);
  });

  it('retries a failing reconcile with backoff until it succeeds', async () => {
    const namespace = await freshNamespace('ctl');
    const core = kubeConfig().makeApiClient(CoreV1Api);
    const attempts: number[] = [];
    configMapController(kubeConfig(), namespace, () => {
      attempts.push(Date.now());
      return attempts.length < 4 ? Promise.reject(new Error('not yet')) : Promise.resolve();
    });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'flaky' } } });
    await expect.poll(() => attempts.length >= 4, { timeout: 20_000, interval: 100, message: 'four attempts' }).toBe(true);
    const gaps = attempts.slice(1).map((at, i) => at - attempts[i]!);
    // 5, 10, 20 ms of backoff at least, each longer than the one before.
    expect(gaps[2]!).toBeGreaterThanOrEqual(gaps[0]!);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(attempts).toHaveLength(4);
  });

  it('restarts a watch cut off from the API server and sees what changed meanwhile', async () => {
    const namespace = await freshNamespace('ctl');
    const admin = kubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const relay = await cuttableRelay(new URL(inject('controlPlane').server));
    stops.push(() => relay.close());
    const viaRelay = kubeConfig();
    viaRelay.clusters[0] = { ...viaRelay.clusters[0]!, server: relay.url };
    const seen = new Set<string>();
    const { controller, informer } = configMapController(viaRelay, namespace, (key) => {
      seen.add(key);
      return Promise.resolve();
    });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'one' } } });
    await expect.poll(() => seen.has(`${namespace}/one`), { timeout: 20_000, interval: 100, message: 'the first object' }).toBe(true);

    relay.cut();
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'two' } } });
    await core.deleteNamespacedConfigMap({ namespace, name: 'one' });
    await expect.poll(() => seen.has(`${namespace}/two`), { timeout: 20_000, interval: 100, message: 'an object created while the watch was down' }).toBe(true);
    await expect.poll(() => informer.get('one', namespace) === undefined, { timeout: 20_000, interval: 100, message: 'the cache forgetting an object deleted while the watch was down' }).toBe(true);
    expect(controller.watchRestarts.get('configmaps')).toBeGreaterThanOrEqual(1);
  });

  it('starts no reconcile until every source has listed, even when a first list fails', async () => {
    const namespace = await freshNamespace('ctl');
    const config = kubeConfig();
    const core = config.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'primary' } } });
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'secondary' } } });
    const primary = makeInformer<V1ConfigMap>(config, `/api/v1/namespaces/${namespace}/configmaps`, () => core.listNamespacedConfigMap({ namespace }));
    // The second source's first list fails, as a list does while the API server restarts.
    let lists = 0;
    const secondary = makeInformer<V1ConfigMap>(config, `/api/v1/namespaces/${namespace}/configmaps`, () =>
      ++lists === 1 ? Promise.reject(new Error('list refused')) : core.listNamespacedConfigMap({ namespace }),
    );
    // What each reconcile saw of the second source: a reconcile that reads a cache the
    // failed list left empty would take "nothing there" for the truth.
    const seenInSecondary: number[] = [];
    const controller = new Controller({
      name: 'test',
      sources: [
        { name: 'primary', informer: primary, keysOf: (object) => [objectKey(object)] },
        { name: 'secondary', informer: secondary, keysOf: () => [] },
      ],
      reconcile: () => {
        seenInSecondary.push(secondary.list(namespace).length);
        return Promise.resolve();
      },
      workers: 2,
      log: quietLog,
      watchBackoffMs: { initial: 300, max: 1_000 },
    });
    const stop = new AbortController();
    const running = controller.run(stop.signal);
    stops.push(async () => {
      stop.abort();
      await running;
    });
    await expect.poll(() => seenInSecondary.length >= 1, { timeout: 20_000, interval: 100, message: 'a reconcile after the retried list' }).toBe(true);
    expect(lists).toBeGreaterThanOrEqual(2);
    expect(controller.watchRestarts.get('secondary')).toBeGreaterThanOrEqual(1);
    expect(seenInSecondary.every((count) => count === 2)).toBe(true);
  });

  it('queues every cached key again at each resync', async () => {
    const namespace = await freshNamespace('ctl');
    const core = kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'quiet' } } });
    let reconciles = 0;
    configMapController(
      kubeConfig(),
      namespace,
      () => {
        reconciles++;
        return Promise.resolve();
      },
      500,
    );
    await expect.poll(() => reconciles >= 4, { timeout: 10_000, interval: 100, message: 'three resyncs of an object nobody touches' }).toBe(true);
  });
});
