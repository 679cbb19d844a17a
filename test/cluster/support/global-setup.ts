import type { TestProject } from 'vitest/node';
import { startCluster, type ClusterInfo } from './cluster.js';
import { startEgressBridge } from './egress.js';

declare module 'vitest' {
  export interface ProvidedContext {
    cluster: ClusterInfo;
    /** http://<node ip>:3128: the tier's HTTP forward proxy to the internet (support/egress.ts); '' when scripts/cluster-test.sh started none. */
    egressProxy: string;
  }
}

/** One cluster (control plane + one real node) for the whole tier; tests work in namespaces of their own. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { stop, ...info } = await startCluster();
  const t = info.timings;
  console.log(`cluster: control plane ${t.controlPlaneMs} ms, node Ready ${t.nodeReadyMs} ms after start`);
  project.provide('cluster', info);
  const socket = process.env.BROWSERPLANE_CLUSTER_EGRESS_SOCKET;
  const egress = socket ? await startEgressBridge(socket, info.nodeIp).catch(async (error: unknown) => {
    await stop();
    throw error;
  }) : undefined;
  project.provide('egressProxy', egress?.url ?? '');
  return async () => {
    await egress?.close();
    await stop();
  };
}
