import type { TestProject } from 'vitest/node';
import { startControlPlane, type ControlPlaneInfo } from './control-plane.js';

declare module 'vitest' {
  export interface ProvidedContext {
    controlPlane: ControlPlaneInfo;
  }
}

/** One control plane for the whole tier; each test works in namespaces of its own. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { server, caFile, adminToken, nobodyToken, dir, stop } = await startControlPlane();
  project.provide('controlPlane', { server, caFile, adminToken, nobodyToken, dir });
  return stop;
}
