/**
 * What the GitOps pool reconciler needs to keep pool rows in step with BrowserPools: the
 * API's own dependencies, composed from the API's configuration (the chart gives both
 * processes the same database and keys), with the custom-resource runtime, so a browser
 * a drain or a discard ends goes through its BrowserSession like every other browser.
 * Without DATABASE_URL the operator runs BrowserSessions only.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { AppDeps } from '../../api/src/index.js';
import { databaseTimeouts, parseConfig, type Config } from '../../api/src/index.js';
import { createPool } from '../../api/src/index.js';
import { composeAppDeps } from '../../api/src/index.js';
import { createCustomResourceRuntime } from '../../api/src/index.js';
import { agentTokensFrom } from '../../contract/agent-client.js';
import { loadEncryptionKey } from '../../api/src/index.js';

export interface PoolReconcilerDeps {
  deps: AppDeps;
  close(): Promise<void>;
}

/** The API's configuration, parsed once by the composition root (main.ts), when DATABASE_URL is set. */
export function apiConfigOf(env: NodeJS.ProcessEnv): (Config & { DATABASE_URL: string }) | undefined {
  if (!env.DATABASE_URL) return undefined;
  return { ...parseConfig(env), DATABASE_URL: env.DATABASE_URL };
}

export async function poolReconcilerDeps(config: Config & { DATABASE_URL: string }, kube: KubeConfig, namespace: string, log: Logger, shutdown: AbortSignal): Promise<PoolReconcilerDeps> {
  const databaseUrl = config.DATABASE_URL;
  const db = createPool(databaseUrl, config.DATABASE_POOL_MAX, databaseTimeouts(config));
  db.on('error', (error) => log.error({ err: error }, 'idle Postgres connection failed'));
  const encryptionKey = await loadEncryptionKey(config.BROWSERPLANE_ENCRYPTION_KEY, config.dataDir);
  const runtime = createCustomResourceRuntime({ config: kube, namespace, log, agentTokens: agentTokensFrom(encryptionKey), launchTimeoutMs: config.BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS });
  const deps = await composeAppDeps(config, { db, databaseUrl, runtime, kubernetes: true, log, shutdown, encryptionKey });
  return {
    deps,
    async close() {
      await runtime.close();
      await deps.events.close();
      await db.end();
    },
  };
}
