import type { TestProject } from 'vitest/node';
import { startCluster, type ClusterInfo } from './cluster.js';

declare module 'vitest' {
  export interface ProvidedContext {
    cluster: ClusterInfo;
  }
}

/** One cluster (control plane + one real node) for the whole tier; tests work in namespaces of their own. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { stop, ...info } = await startCluster();
  const t = info.timings;
  console.log(`cluster: control plane ${t.controlPlaneMs} ms, node Ready ${t.nodeReadyMs} ms after start`);
  project.provide('cluster', info);
  return stop;
}
