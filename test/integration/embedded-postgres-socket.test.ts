import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedPostgres, socketDirUsable } from '../../api/src/db/embedded-postgres.js';
import { createLogger } from '../../api/src/logger.js';

/** The embedded cluster as the service starts it: its own process reaches it over a Unix socket, others over loopback TCP. */

let dataDir: string;
let server: EmbeddedPostgres;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'bp-pg-'));
  server = await EmbeddedPostgres.start(dataDir, createLogger('silent'));
}, 120_000);
afterAll(async () => {
  await server?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

async function serverAddress(url: string): Promise<string | null> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ addr: string | null }>('SELECT inet_server_addr()::text AS addr')).rows[0]!.addr;
  } finally {
    await client.end();
  }
}

describe('embedded Postgres connections', () => {
  it('serves localUrl over a Unix socket in the cluster dir, and url over loopback TCP', async () => {
    expect(server.localUrl).not.toBe(server.url);
    // inet_server_addr() is null on a Unix-socket connection.
    expect(await serverAddress(server.localUrl)).toBeNull();
    expect(await serverAddress(server.url)).toMatch(/^127\.0\.0\.1/);
  });

  it('keeps to TCP for a cluster dir whose socket path would not fit, or that the setting would misread', () => {
    expect(socketDirUsable('/var/lib/browserplane/postgres')).toBe(true);
    expect(socketDirUsable(`/${'d'.repeat(100)}/postgres`)).toBe(false);
    expect(socketDirUsable('/data/a,b/postgres')).toBe(false);
    expect(socketDirUsable('/data/with space/postgres')).toBe(false);
  });
});
