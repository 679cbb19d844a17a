import { constants } from 'node:fs';
import { access, copyFile, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { BindMount } from './isolation.js';

/**
 * chrome_policy applies Chrome enterprise policy to one browser alone. Chromium on Linux
 * reads managed policy only from this directory (Debian's build ignores --policy), which
 * is shared by every browser on the host. So, as root, a per-browser directory is
 * bind-mounted over it inside the browser's own mount namespace (isolation.ts, which
 * every browser of a root agent gets): the mount lives as long as the namespace, i.e.
 * until Chromium's last process exits, and nothing is left to unmount. Without a policy
 * nothing of this runs.
 *
 * Not root (a pod): no namespaces, but the pod's filesystem is its own, so the file is
 * written straight into the directory when it is writable.
 */

import { MANAGED_POLICY_DIR } from '../../contract/agent-env.js';

export { MANAGED_POLICY_DIR };
const POLICY_FILE = 'browserplane-session.json';

/** How Chromium must be started so that it reads the browser's policy. */
export interface PolicyLaunch {
  /** What the browser's mount namespace must bind (as root). */
  binds: BindMount[];
  /** Removes what the launch left outside the work dir. */
  cleanup(): Promise<void>;
}

export class PolicyUnavailableError extends Error {}

/** Nothing to do (and no cost) for an empty policy. */
export async function preparePolicy(options: {
  policy: Record<string, unknown>;
  workDir: string;
  managedDir?: string;
}): Promise<PolicyLaunch | undefined> {
  const { policy, workDir } = options;
  const managedDir = options.managedDir ?? MANAGED_POLICY_DIR;
  if (Object.keys(policy).length === 0) return undefined;
  const json = `${JSON.stringify(policy, null, 2)}\n`;
  if (process.getuid?.() === 0) return isolatedPolicy({ json, workDir, managedDir });
  const writable = await access(managedDir, constants.W_OK).then(
    () => true,
    () => false,
  );
  if (!writable) {
    throw new PolicyUnavailableError(
      `chrome_policy needs ${managedDir} (where Chromium reads managed policy) to be writable, or the agent to run as root ` +
        'so that it can give the browser its own mount namespace; neither holds here',
    );
  }
  const file = path.join(managedDir, POLICY_FILE);
  await writeFile(file, json, { mode: 0o644 });
  return { binds: [], cleanup: () => rm(file, { force: true }) };
}

async function isolatedPolicy(options: { json: string; workDir: string; managedDir: string }): Promise<PolicyLaunch> {
  const { json, workDir, managedDir } = options;
  // Root-owned and read-only to the browser user: the browser must not edit its own policy.
  const dir = path.join(workDir, 'policy');
  await mkdir(dir, { mode: 0o755 });
  await mkdir(managedDir, { recursive: true, mode: 0o755 });
  // The host's own managed policies (an operator's) keep applying to this browser too.
  for (const name of await readdir(managedDir).catch(() => [] as string[])) {
    if (name.endsWith('.json') && name !== POLICY_FILE) await copyFile(path.join(managedDir, name), path.join(dir, name));
  }
  await writeFile(path.join(dir, POLICY_FILE), json, { mode: 0o644 });
  return { binds: [{ source: dir, target: managedDir }], cleanup: () => Promise.resolve() };
}
