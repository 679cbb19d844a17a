import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { freshNamespace, kubeConfig } from './support/kube.js';

// Each replica is a real process running the built elector against the real API server;
// the crash is a SIGKILL. Timings: lease 4 s, renew deadline 3 s, retry 0.5 s.

interface Replica {
  child: ChildProcess;
  events: { identity: string; at: number; event: string; leader?: string; outcome?: string }[];
  waitFor(event: string, timeoutMs?: number): Promise<{ at: number }>;
}

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

function replica(namespace: string, identity: string): Replica {
  const { server, caFile, adminToken } = inject('controlPlane');
  const child = spawn(process.execPath, [path.join(import.meta.dirname, 'support/elector-child.mjs'), server, caFile, adminToken, namespace, identity], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const events: Replica['events'] = [];
  const waiters: (() => void)[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    events.push(JSON.parse(line) as Replica['events'][number]);
    waiters.splice(0).forEach((wake) => wake());
  });
  return {
    child,
    events,
    async waitFor(event, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = events.find((e) => e.event === event);
        if (found) return found;
        if (Date.now() > deadline) throw new Error(`${identity}: no ${event} within ${timeoutMs} ms; saw ${JSON.stringify(events)}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    },
  };
}

async function holder(namespace: string) {
  const lease = await kubeConfig().makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'browserplane-operator', namespace });
  return lease.spec!;
}

describe('leader election on a real Lease', () => {
  it('one of two replicas leads; after a SIGKILL the other takes over once the lease has run out', async () => {
    const namespace = await freshNamespace('lease');
    const a = replica(namespace, 'replica-a');
    await a.waitFor('leading');
    const b = replica(namespace, 'replica-b');
    await b.waitFor('leader');
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(b.events.some((e) => e.event === 'leading')).toBe(false);
    expect((await holder(namespace)).holderIdentity).toBe('replica-a');

    const killedAt = Date.now();
    a.child.kill('SIGKILL');
    const took = await b.waitFor('leading');
    const spec = await holder(namespace);
    expect(spec.holderIdentity).toBe('replica-b');
    expect(spec.leaseTransitions).toBe(1);
    // Not before the 4 s lease has run out from b's last sight of a renewal (a renewed
    // at most 0.5 s before dying), and not much after.
    expect(took.at - killedAt).toBeGreaterThanOrEqual(3_000);
    expect(took.at - killedAt).toBeLessThan(10_000);
    console.log(`failover after SIGKILL: ${took.at - killedAt} ms (lease 4 s, retry 0.5 s)`);
  });

  it('a leader stopped with SIGTERM releases the Lease and the other replica leads at once', async () => {
    const namespace = await freshNamespace('lease');
    const a = replica(namespace, 'replica-a');
    await a.waitFor('leading');
    const b = replica(namespace, 'replica-b');
    await b.waitFor('leader');
    const stoppedAt = Date.now();
    a.child.kill('SIGTERM');
    await a.waitFor('exit');
    const took = await b.waitFor('leading');
    expect(took.at - stoppedAt).toBeLessThan(2_500);
    expect((await holder(namespace)).holderIdentity).toBe('replica-b');
    console.log(`hand-over after SIGTERM: ${took.at - stoppedAt} ms`);
  });
});
