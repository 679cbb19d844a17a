import { execFile } from 'node:child_process';
import { chown, chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EmbeddedPostgres } from '../../api/src/db/embedded-postgres.js';
import { runAsUser } from '../../api/src/db/postgres-user.js';
import { createLogger } from '../../api/src/logger.js';
import { cleanupServices, startService } from '../support/service.js';

/**
 * An external Postgres over TLS, as docs/operations.md tells an operator to connect one:
 * DATABASE_URL with sslmode=verify-full and the server's CA in sslrootcert. The server is a
 * real Postgres (the embedded one, run here as an external server would be) with ssl on and a
 * certificate from a CA this test makes with openssl; the built service connects with it,
 * runs its migrations and serves, every connection of it encrypted; with the wrong CA it
 * refuses the server and says why.
 */

const run = promisify(execFile);
let dir: string;
let server: EmbeddedPostgres;

async function openssl(args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir });
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-pg-tls-'));
  await chmod(dir, 0o755);
  server = await EmbeddedPostgres.start(path.join(dir, 'data'), createLogger('warn'));
  // A CA, a server certificate for 127.0.0.1 signed by it, and another CA that signed nothing.
  await writeFile(path.join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=browserplane test CA']);
  await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'other.key', '-out', 'other.crt', '-days', '2', '-subj', '/CN=another CA']);
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  await openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'san.ext']);
  // Postgres insists its key is its own and private.
  const owner = await runAsUser();
  if (owner) for (const file of ['server.key', 'server.crt']) await chown(path.join(dir, file), owner.uid, owner.gid);
  await chmod(path.join(dir, 'server.key'), 0o600);
  const admin = new pg.Client({ connectionString: server.url.replace(/\/browserplane$/, '/postgres') });
  await admin.connect();
  try {
    await admin.query(`ALTER SYSTEM SET ssl_cert_file = '${path.join(dir, 'server.crt')}'`);
    await admin.query(`ALTER SYSTEM SET ssl_key_file = '${path.join(dir, 'server.key')}'`);
    await admin.query('ALTER SYSTEM SET ssl = on');
    await admin.query('SELECT pg_reload_conf()');
  } finally {
    await admin.end();
  }
}, 120_000);
afterAll(async () => {
  await cleanupServices();
  await server?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const withTls = (ca: string) => `${server.url}?sslmode=verify-full&sslrootcert=${encodeURIComponent(path.join(dir, ca))}`;

describe('an external Postgres over TLS', () => {
  it('serves with sslmode=verify-full and the server\'s CA, every connection encrypted', async () => {
    const service = await startService({ env: { DATABASE_URL: withTls('ca.crt') } });
    expect((await fetch(`${service.url}/readyz`)).status).toBe(200);
    expect((await service.client().browsers.list()).items).toEqual([]);
    const check = new pg.Client({ connectionString: withTls('ca.crt') });
    await check.connect();
    try {
      const { rows } = await check.query<{ tls: number; total: number }>(
        `SELECT count(*) FILTER (WHERE s.ssl)::int AS tls, count(*)::int AS total
           FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
          WHERE a.datname = 'browserplane' AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()`,
      );
      expect(rows[0]!.total).toBeGreaterThan(0);
      expect(rows[0]!.tls).toBe(rows[0]!.total);
    } finally {
      await check.end();
    }
    await service.stop();
  }, 120_000);

  it('refuses a server whose certificate another CA signed, and says so', async () => {
    const service = await startService({ env: { DATABASE_URL: withTls('other.crt') }, waitForListening: false });
    // It stops at once rather than retrying a server it cannot trust (exit 1, the reason on stderr).
    const exit = await service.exited;
    expect(exit.code).toBe(1);
    expect([...service.stdout, ...service.stderr].join('\n')).toMatch(/failed to start: .*unable to verify the first certificate/);
  }, 120_000);
});
