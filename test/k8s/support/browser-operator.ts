import pino from 'pino';
import { createBrowserSessionReconciler } from '../../../operator/src/reconcilers/browser-session.js';
import { createKubernetesRuntime } from '../../../operator/src/runtime/kubernetes-runtime.js';
import { testAgentTokens } from '../../support/agent-access.js';
import { kubeConfig } from './kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './node-agent.js';

/**
 * Browsers for an API in Kubernetes mode in this tier: the operator's BrowserSession
 * reconciler (in-process) turns BrowserSessions into pods of `namespace`, and the suite's
 * node agent runs each pod's agent with a real Chromium on an address of `addresses`.
 */
export async function startBrowserOperator(namespace: string, addresses: { first: number; last: number }): Promise<{ node: NodeAgent; stop(): Promise<void> }> {
  const node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespace}`, namespaces: [namespace], addresses, log: { info: () => {}, warn: () => {} } });
  const log = pino({ level: 'silent' });
  const runtime = createKubernetesRuntime({ config: kubeConfig(), namespace, pod: { image: `${BROWSER_IMAGE_REPOSITORY}:test` }, log, agentTokens: testAgentTokens, launchTimeoutMs: 90_000 });
  const reconciler = createBrowserSessionReconciler({ config: kubeConfig(), namespace, runtime, log, terminateGraceMs: 5_000 });
  const stopping = new AbortController();
  const reconciling = reconciler.run(stopping.signal);
  return {
    node,
    async stop() {
      stopping.abort();
      await reconciling;
      await runtime.close();
      await node.stop();
    },
  };
}
