import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runSandboxed, type LogStream } from './sandbox.js';
import { sourcePath, sourcesDir } from './settings.js';

/**
 * Fetches a deployment's git source into the content-addressed store, keyed by the commit
 * it resolved to. git runs in the app sandbox (as its own uid, seeing only the checkout
 * dir): a URL is the caller's, and git speaks many protocols. GIT_ALLOW_PROTOCOL keeps it
 * to http(s), plus file when local repositories are allowed (then that repository alone is
 * bound read-only into the sandbox: the rest of the host stays out of reach). ssh is
 * never allowed: it would present the host's keys. A token goes in through the
 * environment (GIT_CONFIG_*), never argv, which the host's /proc shows to everyone.
 */

export interface GitFetch {
  url: string;
  ref: string;
  token?: string | undefined;
  allowLocal: boolean;
  dataDir: string;
  timeoutMs: number;
  signal?: AbortSignal;
  onLog: (stream: LogStream, line: string) => void;
}

export class SourceError extends Error {}

/** The local repository a URL names, when it names one (a path or file://). */
function localRepository(url: string): string | undefined {
  if (url.startsWith('file://')) return fileURLToPath(url);
  if (url.startsWith('/')) return url;
  return undefined;
}

/** Throws SourceError for a URL this service will not fetch (checked at create, and again at build). */
export function checkGitUrl(url: string, allowLocal: boolean): void {
  const local = localRepository(url);
  if (local !== undefined) {
    if (!allowLocal) throw new SourceError(`${url} is a local repository; this service does not build from local repositories (BROWSERPLANE_APP_GIT_ALLOW_LOCAL)`);
    return;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new SourceError(`${JSON.stringify(url)} is not a URL git can fetch (use https://)`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new SourceError(`${parsed.protocol} URLs are not fetched; use https://`);
}

/** Fetches `ref` of `url`; resolves to the commit, whose tree is now at sources/<commit>. */
export async function fetchGitSource(options: GitFetch): Promise<string> {
  checkGitUrl(options.url, options.allowLocal);
  const local = localRepository(options.url);
  const incoming = path.join(sourcesDir(options.dataDir), `.incoming-${randomBytes(8).toString('hex')}`);
  await mkdir(incoming, { mode: 0o755 });
  try {
    const env: Record<string, string> = {
      GIT_ALLOW_PROTOCOL: local !== undefined ? 'file' : 'https:http',
      GIT_TERMINAL_PROMPT: '0',
      GIT_CONFIG_NOSYSTEM: '1',
    };
    if (options.token) {
      env.GIT_CONFIG_COUNT = '1';
      env.GIT_CONFIG_KEY_0 = 'http.extraHeader';
      env.GIT_CONFIG_VALUE_0 = `Authorization: Basic ${Buffer.from(`x-access-token:${options.token}`).toString('base64')}`;
    }
    // One shell line in the sandbox: init, a shallow fetch of the ref, checkout, and the
    // commit printed last. The URL and ref are arguments ($1, $2), never shell text.
    // safe.directory counts only in a global config (the run's HOME, its scratch): a local
    // repository belongs to another uid than the run's, and is only read.
    const script = 'set -e; git config --global safe.directory "*"; git init -q .; git fetch -q --depth 1 -- "$1" "$2"; git -c advice.detachedHead=false checkout -q FETCH_HEAD; git rev-parse HEAD > .git/browserplane-commit';
    const result = await runSandboxed({
      command: '/bin/sh',
      args: ['-c', script, 'git-fetch', options.url, options.ref],
      cwd: incoming,
      writable: [incoming],
      readable: local !== undefined ? [local] : [],
      env,
      timeoutMs: options.timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
      onLog: options.onLog,
      network: local === undefined,
      dataDir: options.dataDir,
    });
    if (result.timedOut) throw new SourceError('fetching the git source took too long');
    if (result.code !== 0) throw new SourceError(`git could not fetch ref ${JSON.stringify(options.ref)} of ${options.url} (exit ${result.code ?? result.signal})`);
    const commit = (await readFile(path.join(incoming, '.git', 'browserplane-commit'), 'utf8')).trim();
    if (!/^[0-9a-f]{40,64}$/.test(commit)) throw new SourceError('git did not report the commit it checked out');
    await rm(path.join(incoming, '.git'), { recursive: true, force: true });
    const stored = sourcePath(options.dataDir, commit);
    const known = await stat(stored).then(() => true, () => false);
    if (!known) await rename(incoming, stored);
    return commit;
  } finally {
    await rm(incoming, { recursive: true, force: true });
  }
}
