import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { EmbeddedPostgres } from '../../api/src/db/embedded-postgres.js';
import { migrate } from '../../api/src/db/migrate.js';
import { createLogger } from '../../api/src/logger.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL of the test cluster; each test file clones the migrated template from it. */
    pgAdminUrl: string;
  }
}

export const TEMPLATE_DB = 'browserplane_template';

/**
 * One real Postgres for the whole integration run (TEST_DATABASE_URL, or an embedded
 * cluster in a temp dir), migrated once into a template database.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');
  let dataDir: string | undefined;
  let server: EmbeddedPostgres | undefined;
  let adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-test-pg-'));
    server = await EmbeddedPostgres.start(dataDir, log);
    adminUrl = server.url.replace(/\/browserplane$/, '/postgres');
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${TEMPLATE_DB}`);
  await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
  await admin.end();
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${TEMPLATE_DB}`;
  await migrate(templateUrl.toString(), log);
  project.provide('pgAdminUrl', adminUrl);
  return async () => {
    await server?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  };
}
