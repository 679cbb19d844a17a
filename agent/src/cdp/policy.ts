import path from 'node:path';

/**
 * What a CDP client may ask of its browser beyond what Chromium itself checks. Every
 * virtual connection's commands (each /cdp client, each BiDi mapper) pass here before they
 * reach the pipe (mux.ts); the agent's own commands do not.
 *
 * - Target.createBrowserContext with a proxyServer: a context with a proxy of its own
 *   bypasses the agent's forwarder, and with it BROWSERPLANE_BLOCK_PRIVATE_NETWORKS
 *   (`direct://` reached loopback). Refused while private networks are blocked; otherwise
 *   a client's own choice, as in any Chromium.
 * - Browser.setDownloadBehavior / Page.setDownloadBehavior's downloadPath is a path of the
 *   browser's file system as the fs API names it ("/" is the session's files root), so
 *   downloads land where the API reads them and count against the disk quota. Taken as a
 *   host path, a client could make Chromium write anywhere the session's uid may (the
 *   host's /tmp), beyond the quota, leaving files for a later session of the same uid.
 */

export interface CdpPolicy {
  blockPrivateNetworks: boolean;
  /** The host directory the fs API calls "/" (Chromium's HOME). */
  filesRoot: string;
}

export type PolicyVerdict = { refuse: string } | { params: unknown };

const DOWNLOAD_BEHAVIOR = new Set(['Browser.setDownloadBehavior', 'Page.setDownloadBehavior']);

export function applyCdpPolicy(policy: CdpPolicy, method: string, params: unknown): PolicyVerdict {
  if (!params || typeof params !== 'object' || Array.isArray(params)) return { params };
  const given = params as Record<string, unknown>;
  if (method === 'Target.createBrowserContext' && policy.blockPrivateNetworks && given.proxyServer !== undefined && given.proxyServer !== '') {
    return {
      refuse:
        'proxyServer is refused: this service keeps browsers off private networks (BROWSERPLANE_BLOCK_PRIVATE_NETWORKS), ' +
        "and a context's own proxy would bypass that; set the session's proxy through the API instead",
    };
  }
  if (DOWNLOAD_BEHAVIOR.has(method) && typeof given.downloadPath === 'string') {
    // resolve() from "/" folds every "..", so the result stays under the root.
    return { params: { ...given, downloadPath: path.join(policy.filesRoot, path.posix.resolve('/', given.downloadPath)) } };
  }
  return { params };
}
