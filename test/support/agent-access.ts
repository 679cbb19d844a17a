import { chmod, mkdtemp } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { agentTokensFrom, type AgentTokens } from '../../contract/agent-client.js';

/**
 * For tests that start agents or runtimes themselves and then talk to the agents directly:
 * every agent request needs the browser's agent token (agent/src/access.ts). A fresh key
 * per test file, as a service would derive the tokens from its encryption key.
 */
export const testEncryptionKey: Buffer = randomBytes(32);
export const testAgentTokens: AgentTokens = agentTokensFrom(testEncryptionKey);

/** The header an agent request presents for `browserId`. */
export const agentAuth = (browserId: string, tokens: AgentTokens = testAgentTokens): { authorization: string } => ({ authorization: `Bearer ${tokens(browserId)}` });

/** Agent URLs a test launched, with the browser each serves, so helpers that take a URL can authenticate. */
export class AgentDirectory {
  private readonly browsers = new Map<string, string>();
  constructor(private readonly tokens: AgentTokens = testAgentTokens) {}

  remember(agentUrl: string, browserId: string): string {
    this.browsers.set(agentUrl.replace(/\/+$/, ''), browserId);
    return agentUrl;
  }

  /** The Authorization header for the agent at `url` (any path or ws:// scheme under it). */
  auth(url: string): { authorization: string } {
    const base = new URL(url.replace(/^ws/, 'http')).origin;
    const browserId = this.browsers.get(base);
    if (!browserId) throw new Error(`no browser launched at ${url}`);
    return agentAuth(browserId, this.tokens);
  }
}

/**
 * A directory for stand-in Chromium scripts. The browser's mount namespace hides the work
 * root and the host's /tmp, /var/tmp and /run/lock (agent/src/isolation.ts), so they live
 * under /run, searchable by session uids. The caller removes it.
 */
export async function fakeChromiumDir(): Promise<string> {
  const dir = await mkdtemp('/run/browserplane-test-');
  await chmod(dir, 0o711);
  return dir;
}
