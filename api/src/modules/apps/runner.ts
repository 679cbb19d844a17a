import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { copyFile, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { packageRoot } from '../../paths.js';
import { ensureAppsDirs, runSandboxed, type LogStream, type SandboxResult } from './sandbox.js';
import { PYTHON_RUNNER, PYTHON_RUNNER_NAME, venvPython } from './python-runner.js';

/**
 * Runs an app version's code in the sandbox: inspectApps (the apps and actions an entry
 * registers, at the end of a build) and runAction (one invocation). Both start, by the
 * app version's runtime, runner-child.js under Node or runner.py (python-runner.ts) under
 * the build's venv python inside the sandbox, which sees the build dir (the venv in it)
 * read-only, the runner scripts read-only, /usr read-only (Python's standard library is
 * /usr/lib/python3.*) and a scratch /tmp; it answers on fd 3 (the app's stdout and stderr
 * are its log).
 */

export interface RunnerOptions {
  buildDir: string;
  entry: string;
  runtime: 'node' | 'python';
  env: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
  onLog?: (stream: LogStream, line: string) => void;
  dataDir: string;
}

export type ActionResult = { ok: true; output: string | null } | { ok: false; error: string };

/** The runner's V8 heap cap (MiB): past it Node fails the run with a heap out-of-memory error. */
export const RUNNER_HEAP_MB = Number(process.env.BROWSERPLANE_APP_HEAP_MB ?? 1024);

const CHILD_NAME = 'runner-child.mjs';

let installed: Promise<string> | undefined;

/**
 * The runner script, copied from dist into <data dir>/apps/runtime/<hash>/: the install
 * (a home dir, a checkout) may not be reachable by the run's uid, the data dir is made so.
 */
function installChild(dataDir: string): Promise<string> {
  installed ??= (async () => {
    const compiled = path.join(packageRoot(), 'dist', 'api', 'src', 'modules', 'apps', 'runner-child.js');
    if (!existsSync(compiled)) throw new Error(`${compiled} is missing: build the service first (npm run build)`);
    const text = await readFile(compiled);
    const { apps } = await ensureAppsDirs(dataDir);
    const dir = path.join(apps, 'runtime', createHash('sha256').update(text).update(PYTHON_RUNNER).digest('hex').slice(0, 16));
    const target = path.join(dir, CHILD_NAME);
    if (!existsSync(target)) {
      await mkdir(dir, { recursive: true, mode: 0o755 });
      await writeFile(path.join(dir, `${PYTHON_RUNNER_NAME}.tmp`), PYTHON_RUNNER, { mode: 0o644 });
      await rename(path.join(dir, `${PYTHON_RUNNER_NAME}.tmp`), path.join(dir, PYTHON_RUNNER_NAME));
      await copyFile(compiled, `${target}.tmp`);
      await rename(`${target}.tmp`, target);
    }
    return dir;
  })();
  installed.catch(() => (installed = undefined));
  return installed;
}

async function runChild(options: RunnerOptions, args: string[], stdin: string | undefined): Promise<{ result: SandboxResult; answer: unknown }> {
  const childDir = await installChild(options.dataDir);
  const entry = path.resolve(options.buildDir, options.entry);
  if (!entry.startsWith(path.resolve(options.buildDir) + path.sep)) throw new Error(`entry ${options.entry} lies outside the build dir`);
  const python = options.runtime === 'python';
  if (!python && options.runtime !== 'node') throw new Error(`runtime ${String(options.runtime)} is not supported`);
  const result = await runSandboxed({
    ...(python
      ? {
          command: venvPython(options.buildDir),
          // -E: no PYTHON* variable (PYTHONPATH, PYTHONSTARTUP) changes what runs; -u streams the
          // log; -B writes no bytecode into the read-only build.
          args: ['-E', '-u', '-B', '-X', 'utf8', path.join(childDir, PYTHON_RUNNER_NAME), args[0]!, entry, ...args.slice(1)],
          env: { ...options.env },
        }
      : {
          command: process.execPath,
          args: [`--max-old-space-size=${RUNNER_HEAP_MB}`, '--enable-source-maps', path.join(childDir, CHILD_NAME), args[0]!, entry, ...args.slice(1)],
          env: { NODE_ENV: 'production', ...options.env },
        }),
    cwd: options.buildDir,
    writable: [],
    readable: [options.buildDir, childDir],
    timeoutMs: options.timeoutMs,
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.onLog ? { onLog: options.onLog } : {}),
    network: true,
    dataDir: options.dataDir,
    resultFd: true,
    ...(stdin !== undefined ? { stdin } : {}),
  });
  return { result, answer: lastJsonLine(result.result ?? '') };
}

/** The child's answer is the last line on fd 3 (an app writing there first only confuses its own result). */
function lastJsonLine(text: string): unknown {
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  const last = lines.at(-1);
  if (last === undefined) return undefined;
  try {
    return JSON.parse(last) as unknown;
  } catch {
    return undefined;
  }
}

function failureOf(result: SandboxResult, options: RunnerOptions): string {
  if (result.timedOut) return `timed out after ${Math.round(options.timeoutMs / 1000)}s`;
  if (options.signal?.aborted) return 'cancelled';
  if (result.signal) return `the app's process was killed by ${result.signal}`;
  return `the app's process exited with code ${String(result.code)} without a result`;
}

export async function inspectApps(opts: RunnerOptions): Promise<{ apps: { name: string; actions: { name: string }[] }[] }> {
  // `new Kernel()` at the top of an entry throws without a key; no request is made while
  // reading the registry, so a placeholder does (the deployment's own env wins).
  const { result, answer } = await runChild({ ...opts, env: { KERNEL_API_KEY: 'browserplane-inspect-placeholder', ...opts.env } }, ['inspect'], undefined);
  const apps = (answer as { apps?: unknown } | undefined)?.apps;
  if (result.timedOut || result.code !== 0 || !Array.isArray(apps)) {
    const reason = (answer as { error?: unknown } | undefined)?.error;
    throw new Error(`reading the apps of ${opts.entry} failed: ${typeof reason === 'string' ? reason : failureOf(result, opts)}`);
  }
  return {
    apps: apps.map((app: { name: unknown; actions?: { name: unknown }[] }) => ({
      name: String(app.name),
      actions: (app.actions ?? []).map((action) => ({ name: String(action.name) })),
    })),
  };
}

export async function runAction(
  opts: RunnerOptions & { appName: string; actionName: string; payload: string | null; invocationId: string },
): Promise<ActionResult> {
  let run: { result: SandboxResult; answer: unknown };
  try {
    run = await runChild(opts, ['invoke', opts.appName, opts.actionName, opts.invocationId], opts.payload ?? '');
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
  const { result, answer } = run;
  if (result.timedOut || opts.signal?.aborted) return { ok: false, error: failureOf(result, opts) };
  const reply = answer as { ok?: unknown; output?: unknown; error?: unknown } | undefined;
  if (reply?.ok === true) return { ok: true, output: typeof reply.output === 'string' ? reply.output : null };
  if (reply?.ok === false && typeof reply.error === 'string') return { ok: false, error: reply.error };
  return { ok: false, error: failureOf(result, opts) };
}
