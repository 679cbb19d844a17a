import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT } from './helm.js';
import { BROWSER_IMAGE_REPOSITORY } from './node-agent.js';
import { testEncryptionKey } from '../../support/agent-access.js';

// The built operator (dist/operator/src/main.js) as a child process, as the k8s tests run
// it: its JSON log lines collected, waits that wake on each new line, and its health
// server reached on the port it logs.

const MAIN = path.join(ROOT, 'dist/operator/src/main.js');

/** One pino line of the operator, with the time the test saw it. Fields are the ones tests match on. */
export interface OperatorLogLine {
  msg: string;
  level?: number | string;
  leader?: string;
  port?: number;
  controller?: string;
  resource?: string;
  err?: { message?: string };
  /** Date.now() when the line arrived. */
  at: number;
  [field: string]: unknown;
}

export interface OperatorProcessOptions {
  kubeconfig: string;
  /** POD_NAMESPACE: the Lease's, the BrowserSessions' and the browser pods' namespace. */
  namespace: string;
  /** POD_NAME: this replica's identity in the Lease. */
  identity: string;
  /** DATABASE_URL: with it the operator also reconciles BrowserPools and AuthConnections. */
  databaseUrl?: string;
  /** Merged over the defaults last; undefined removes a default, leaving the operator's own. */
  env?: Record<string, string | undefined>;
  /** 'inherit' passes stderr through to the test's; 'lines' collects it into lines like stdout. */
  stderr?: 'inherit' | 'lines';
}

export interface OperatorProcess {
  identity: string;
  child: ChildProcess;
  lines: OperatorLogLine[];
  /** The exit code; null after a signal. */
  exited: Promise<number | null>;
  /** The first line (seen so far or to come) that matches: a string matches msg exactly. */
  waitFor(matcher: string | ((line: OperatorLogLine) => boolean), what?: string, timeoutMs?: number): Promise<OperatorLogLine>;
  /** GET on the health server, JSON body. */
  health(route: string): Promise<{ status: number; body: { status: string; role: string } }>;
  /** The last log lines, one JSON each, for an error message. */
  logTail(count?: number): string;
}

/** Short leader-election timings so that failovers take seconds; a fast resync. */
const DEFAULT_ENV: Record<string, string> = {
  BROWSERPLANE_OPERATOR_LEASE: 'browserplane-operator',
  BROWSERPLANE_LEASE_DURATION_SECONDS: '4',
  BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS: '3',
  BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS: '0.5',
  BROWSERPLANE_OPERATOR_HEALTH_HOST: '127.0.0.1',
  BROWSERPLANE_OPERATOR_HEALTH_PORT: '0',
  BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: `${BROWSER_IMAGE_REPOSITORY}:test`, imagePullPolicy: 'IfNotPresent', nodeSelector: {}, tolerations: [] }),
  BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '90000',
  BROWSERPLANE_BROWSER_TERMINATE_GRACE_MS: '5000',
  BROWSERPLANE_OPERATOR_RESYNC_SECONDS: '5',
  LOG_LEVEL: 'info',
  // The API's key, from which the agent tokens derive: tests compute them with the same one.
  BROWSERPLANE_ENCRYPTION_KEY: testEncryptionKey.toString('base64'),
};

/** env entries that leave the lease timings to the operator's own defaults (15/10/2 s), for a lone replica. */
export const OPERATOR_LEASE_TIMINGS_UNSET = {
  BROWSERPLANE_LEASE_DURATION_SECONDS: undefined,
  BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS: undefined,
  BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS: undefined,
} as const;

/** Throws unless the operator is built; a suite calls it first to fail before its setup. */
export function assertOperatorBuilt(): void {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run make build first`);
}

function environment(options: OperatorProcessOptions): Record<string, string> {
  const merged: Record<string, string | undefined> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    KUBECONFIG: options.kubeconfig,
    POD_NAME: options.identity,
    POD_NAMESPACE: options.namespace,
    DATABASE_URL: options.databaseUrl,
    ...DEFAULT_ENV,
    ...options.env,
  };
  return Object.fromEntries(Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

export function startOperatorProcess(options: OperatorProcessOptions): OperatorProcess {
  assertOperatorBuilt();
  const { identity } = options;
  const child = spawn(process.execPath, [MAIN], { env: environment(options), stdio: ['ignore', 'pipe', options.stderr === 'lines' ? 'pipe' : 'inherit'] });
  const lines: OperatorLogLine[] = [];
  const waiters: (() => void)[] = [];
  const wake = () => waiters.splice(0).forEach((resolve) => resolve());
  const record = (text: string) => {
    try {
      lines.push({ ...(JSON.parse(text) as OperatorLogLine), at: Date.now() });
    } catch {
      lines.push({ msg: text, level: 'raw', at: Date.now() });
    }
    wake();
  };
  createInterface({ input: child.stdout! }).on('line', record);
  if (child.stderr) createInterface({ input: child.stderr }).on('line', record);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // 'close' comes after the last line: from then on no line can arrive.
  let closed: string | undefined;
  child.once('close', (code, signal) => {
    closed = `exited (${signal ?? `code ${code}`})`;
    wake();
  });

  const logTail = (count = 40) =>
    lines
      .slice(-count)
      .map(({ at: _at, ...line }) => JSON.stringify(line).slice(0, 400))
      .join('\n');
  const operator: OperatorProcess = {
    identity,
    child,
    lines,
    exited,
    logTail,
    async waitFor(matcher, what, timeoutMs = 30_000) {
      const matches = typeof matcher === 'string' ? (line: OperatorLogLine) => line.msg === matcher : matcher;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = lines.find(matches);
        if (found) return found;
        const ended = closed ?? (Date.now() > deadline ? `not within ${timeoutMs} ms` : undefined);
        if (ended) throw new Error(`${identity}: no ${what ?? String(matcher)}: ${ended}; its last log lines:\n${logTail()}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
    },
    async health(route) {
      const { port } = await operator.waitFor('operator started; campaigning');
      const response = await fetch(`http://127.0.0.1:${port}${route}`);
      return { status: response.status, body: (await response.json()) as { status: string; role: string } };
    },
  };
  return operator;
}
