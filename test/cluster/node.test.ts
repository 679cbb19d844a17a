import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, inject, it } from 'vitest';
import { clusterKubeConfig } from './support/cluster.js';

describe('the node', () => {
  it('registers and is Ready', async () => {
    const info = inject('cluster');
    const node = await clusterKubeConfig(info).makeApiClient(CoreV1Api).readNode({ name: info.nodeName });
    expect(node.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  });
});
