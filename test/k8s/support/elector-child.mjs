/* global process, AbortController -- a Node script */
// A stand-in operator replica for the leader-election test: campaigns for one Lease with
// the built elector and prints what happens as JSON lines. Killed with SIGKILL by the test
// to play a crashed leader; stops cleanly (releasing the Lease) on SIGTERM.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { LeaderElector } from '../../../dist/operator/src/k8s/leader-election.js';
import { kubernetesLeaseStore } from '../../../dist/operator/src/k8s/lease-store.js';

const [server, caFile, token, namespace, identity] = process.argv.slice(2);
const config = new KubeConfig();
config.loadFromOptions({
  clusters: [{ name: 't', server, caData: readFileSync(caFile).toString('base64') }],
  users: [{ name: 't', token }],
  contexts: [{ name: 't', cluster: 't', user: 't' }],
  currentContext: 't',
});
const say = (event) => process.stdout.write(JSON.stringify({ identity, at: Date.now(), ...event }) + '\n');
const stop = new AbortController();
process.on('SIGTERM', () => stop.abort());
const elector = new LeaderElector({
  identity,
  store: kubernetesLeaseStore(config, namespace, 'browserplane-operator'),
  leaseDurationMs: 4_000,
  renewDeadlineMs: 3_000,
  retryPeriodMs: 500,
  onStartedLeading: () => say({ event: 'leading' }),
  onStoppedLeading: () => say({ event: 'stopped' }),
  onNewLeader: (leader) => say({ event: 'leader', leader }),
  onError: (error) => say({ event: 'error', message: String(error) }),
});
say({ event: 'started' });
const outcome = await elector.run(stop.signal);
say({ event: 'exit', outcome });
