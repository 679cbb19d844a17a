import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AppDeps, AppSettings } from '../../api/src/app-deps.js';
import { buildApp } from '../../api/src/app.js';
import { FixedClock, type Clock } from '../../api/src/clock.js';
import { createLogger } from '../../api/src/logger.js';
import { countProjectApiKeys, issueApiKey } from '../../api/src/modules/api-keys/service.js';
import { insertOrg } from '../../api/src/modules/orgs/store.js';
import { insertProject } from '../../api/src/modules/projects/store.js';
import { freshDatabase, type TestDatabase } from './database.js';
import { HttpClient } from './http.js';

export interface Tenant {
  orgId: string;
  defaultProjectId: string;
  /** Plaintext of an org-wide admin key. */
  adminKey: string;
  adminKeyId: string;
  /** A client authenticated with the admin key. */
  http: HttpClient;
}

export interface TestApp {
  url: string;
  database: TestDatabase;
  deps: AppDeps;
  clock: Clock;
  /** The first org, created with the app. */
  tenant: Tenant;
  /** Another org, for isolation tests. */
  newTenant(name?: string): Promise<Tenant>;
  /** A client with any key, or none. */
  client(key?: string, headers?: Record<string, string>): HttpClient;
  close(): Promise<void>;
}

/**
 * The real app on a free port, in-process, against its own fresh database. The clock
 * is injectable; by default it is the real one.
 */
export async function startTestApp(
  options: { clock?: Clock; settings?: Partial<AppSettings>; log?: Logger } = {},
): Promise<TestApp> {
  const database = await freshDatabase();
  const clock = options.clock ?? new FixedClock(new Date());
  const deps: AppDeps = {
    db: database.db,
    clock,
    log: options.log ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'),
    settings: { maxBodyBytes: 64 * 1024, orgMaxConcurrentSessions: 50, ...options.settings },
    projectResources: [countProjectApiKeys],
  };
  const { app } = buildApp(deps);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = (key?: string, headers?: Record<string, string>) => new HttpClient(url, key, headers);

  const newTenant = async (name = 'org'): Promise<Tenant> => {
    const now = clock.now();
    const org = await insertOrg(database.db, { name, ownerEmail: `${name}@example.test`, now });
    const project = await insertProject(database.db, { orgId: org.id, name: 'default', isDefault: true, now });
    const { row, plaintext } = await issueApiKey(database.db, {
      orgId: org.id,
      projectId: null,
      name: 'admin',
      lifetimeDays: null,
      createdBy: null,
      now,
    });
    return {
      orgId: org.id,
      defaultProjectId: project.id,
      adminKey: plaintext,
      adminKeyId: row.id,
      http: client(plaintext),
    };
  };
  const tenant = await newTenant('first');
  return {
    url,
    database,
    deps,
    clock,
    tenant,
    newTenant,
    client,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await database.drop();
    },
  };
}
