import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { inTransaction, type Db } from '../../db/pool.js';
import { hashApiKey } from '../api-keys/key-material.js';
import { issueApiKey } from '../api-keys/service.js';
import { findApiKeyByHash } from '../api-keys/store.js';
import { insertProject } from '../projects/store.js';
import { firstOrg, insertOrg } from './store.js';

export const ADMIN_KEY_FILE = 'admin-api-key';
export const BOOTSTRAP_KEY_NAME = 'bootstrap admin';
export const DEFAULT_PROJECT_NAME = 'default';

export interface BootstrapOptions {
  orgName: string;
  ownerEmail: string;
  /** BROWSERPLANE_API_KEY: accepted as the bootstrap admin key. */
  configuredKey: string | undefined;
  dataDir: string;
}

export interface BootstrapResult {
  orgId: string;
  createdOrg: boolean;
  /** The generated admin key, present only on the start that created it. */
  generatedKey?: string;
}

/**
 * First start: creates the org, its default project and an admin key. With
 * BROWSERPLANE_API_KEY set, that key is the admin key (added on any start where it is
 * not known yet); otherwise one is generated once and written to the data dir.
 * An advisory lock keeps replicas that start together from bootstrapping twice.
 */
export async function bootstrap(db: Db, clock: Clock, options: BootstrapOptions, log: Logger): Promise<BootstrapResult> {
  const result = await inTransaction(db, async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock(hashtext('browserplane:bootstrap'))");
    const now = clock.now();
    let org = await firstOrg(tx);
    const createdOrg = !org;
    if (!org) {
      org = await insertOrg(tx, { name: options.orgName, ownerEmail: options.ownerEmail, now });
      await insertProject(tx, { orgId: org.id, name: DEFAULT_PROJECT_NAME, isDefault: true, now });
      log.info({ orgId: org.id }, 'created organisation and default project');
    }
    const issue = (plaintext?: string) =>
      issueApiKey(tx, {
        orgId: org.id,
        projectId: null,
        name: BOOTSTRAP_KEY_NAME,
        lifetimeDays: null,
        createdBy: null,
        now,
        ...(plaintext ? { plaintext } : {}),
      });
    if (options.configuredKey) {
      const existing = await findApiKeyByHash(tx, hashApiKey(options.configuredKey));
      if (!existing) {
        await issue(options.configuredKey);
        log.info('accepted BROWSERPLANE_API_KEY as an admin key');
      } else if (existing.deleted_at) {
        log.warn('BROWSERPLANE_API_KEY was deleted through the API and stays refused');
      }
      return { orgId: org.id, createdOrg };
    }
    if (!createdOrg) return { orgId: org.id, createdOrg };
    const { plaintext } = await issue();
    return { orgId: org.id, createdOrg, generatedKey: plaintext };
  });
  if (result.generatedKey) {
    await writeFile(path.join(options.dataDir, ADMIN_KEY_FILE), result.generatedKey + '\n', { mode: 0o600 });
  }
  return result;
}
