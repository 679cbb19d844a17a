/**
 * The cluster tier's egress: its network namespace has no route out, so
 * scripts/cluster-test.sh starts an HTTP forward proxy in the host's namespace on a unix
 * socket (scripts/cluster-egress-proxy.mjs, BROWSERPLANE_CLUSTER_EGRESS_SOCKET) and this
 * bridges TCP <node ip>:3128 inside to it, byte for byte. Pods (app builds: npm, PyPI) use
 * http://<node ip>:3128 as their proxy; the node IP is local to the namespace, so pods reach
 * it through the CNI bridge like the tier's Postgres. Nothing of the host's network changes.
 */
import { existsSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';

export const EGRESS_PROXY_PORT = 3128;

export interface EgressBridge {
  /** http://<node ip>:3128, for HTTP(S)_PROXY. */
  url: string;
  close: () => Promise<void>;
}

export async function startEgressBridge(socketPath: string, host: string, port = EGRESS_PROXY_PORT): Promise<EgressBridge> {
  if (!existsSync(socketPath)) throw new Error(`the egress proxy's socket ${socketPath} does not exist (scripts/cluster-test.sh starts it)`);
  const server: Server = createServer((client) => {
    const upstream = connect(socketPath);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    url: `http://${host}:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
