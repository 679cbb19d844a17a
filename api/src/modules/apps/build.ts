import { chmod, copyFile, cp, lstat, mkdir, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { runSandboxed, type LogStream } from './sandbox.js';
import { extractZip, isZipFile, safeRelativePath } from './unpack.js';
import { fetchGitSource, SourceError } from './git-source.js';
import { buildDirOf, sourcePath, type AppsSettings } from './settings.js';
import type { DeploymentRow } from './deployments-store.js';
import { BuildError } from './build-error.js';
import { installPythonDependencies, PY_ENTRY } from './python-build.js';
import type { RunnerOptions } from './runner.js';

export { BuildError };

/**
 * One deployment's build, from its stored source to the apps its entrypoint registers:
 *
 *   1. the source into apps/builds/<id>/ (a single file as entrypoint_rel_path, a zip
 *      extracted safely, a git checkout copied from the store);
 *   2. dependencies: `npm ci` with a package-lock.json, else `npm install`; a source with
 *      no package.json gets one naming @onkernel/sdk at the version this service speaks,
 *      so a single index.ts can import it. npm runs in the app sandbox WITH install
 *      scripts: they are the app author's code, like the app itself, and the sandbox (own
 *      uid, only the build dir writable, nothing of the data dir visible) is what makes
 *      running them safe; --ignore-scripts would break packages with native parts;
 *   3. a TypeScript entry is bundled to .browserplane/entry.mjs by esbuild (the app's own
 *      files bundled, node_modules packages external so the app's @onkernel/sdk is the one
 *      whose registry the runner reads). esbuild runs in the sandbox as well: a link an
 *      install script planted (src/x.json -> /root/...) would otherwise be read by root;
 *   A .py entrypoint instead gets a virtualenv and pip (python-build.ts), no bundling;
 *   4. the runner's inspectApps reads the registry (api/src/modules/apps/runner.ts).
 *
 * Every step shares one deadline (BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS) and the signal
 * a delete aborts.
 */

/** The SDK version a generated package.json names: the one whose wire this service speaks. */
export const DEFAULT_SDK_VERSION = '0.84.0';

const TS_ENTRY = /\.(ts|mts|cts|tsx)$/;
const JS_ENTRY = /\.(js|mjs|cjs)$/;
export const BUILT_ENTRY = '.browserplane/entry.mjs';

/** What the build needs of the runner (runner.ts's inspectApps, injected so tests and the module wire it). */
export type InspectApps = (opts: RunnerOptions) => Promise<{ apps: { name: string; actions: { name: string }[] }[] }>;

export interface BuildContext {
  settings: AppsSettings;
  inspectApps: InspectApps;
  /** The git token of a git deployment (kept in memory only, never stored). */
  gitToken?: string | undefined;
  signal: AbortSignal;
  log: (line: string) => void;
}

export interface BuildOutput {
  entry: string;
  runtime: 'node' | 'python';
  checksum: string | undefined;
  apps: { name: string; actions: { name: string }[] }[];
}

export async function buildDeployment(row: DeploymentRow, ctx: BuildContext): Promise<BuildOutput> {
  const deadline = Date.now() + ctx.settings.buildTimeoutMs;
  const remaining = () => {
    const left = deadline - Date.now();
    if (left <= 0) throw new BuildError(`the build took longer than ${ctx.settings.buildTimeoutMs / 1000} s (BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS)`);
    return left;
  };
  const { dataDir } = ctx.settings;
  const buildDir = buildDirOf(dataDir, row.id);
  await rm(buildDir, { recursive: true, force: true });
  await mkdir(buildDir, { recursive: true, mode: 0o755 });
  const onLog = (_stream: LogStream, line: string) => ctx.log(line);

  let checksum = row.source_checksum ?? undefined;
  if (row.source_type === 'github') {
    ctx.log(`fetching ${row.source_ref ?? ''} of ${row.source_url ?? ''}`);
    try {
      checksum = await fetchGitSource({
        url: row.source_url!,
        ref: row.source_ref!,
        token: ctx.gitToken,
        allowLocal: ctx.settings.gitAllowLocal,
        dataDir,
        timeoutMs: remaining(),
        signal: ctx.signal,
        onLog,
      });
    } catch (error) {
      if (error instanceof SourceError) throw new BuildError(error.message);
      throw error;
    }
    ctx.log(`commit ${checksum}`);
    await copyGitTree(sourcePath(dataDir, checksum), row.source_path, buildDir, ctx.settings);
  } else {
    await placeUpload(sourcePath(dataDir, checksum!), row.entrypoint_rel_path, buildDir, ctx.settings);
  }
  ctx.signal.throwIfAborted();
  await checkEntrypoint(buildDir, row.entrypoint_rel_path);

  let entry = safeRelativePath(row.entrypoint_rel_path, 'entrypoint_rel_path').join('/');
  const runtime = PY_ENTRY.test(entry) ? 'python' : 'node';
  if (runtime === 'python') await installPythonDependencies(buildDir, { dataDir, signal: ctx.signal, onLog, timeoutMs: remaining });
  else await installDependencies(buildDir, { dataDir, signal: ctx.signal, onLog, timeoutMs: remaining });
  ctx.signal.throwIfAborted();

  if (TS_ENTRY.test(entry)) {
    await transpile(buildDir, entry, { dataDir, signal: ctx.signal, onLog, timeoutMs: remaining() });
    entry = BUILT_ENTRY;
  }
  ctx.signal.throwIfAborted();
  ctx.log('reading the apps the entrypoint registers');
  const { apps } = await ctx.inspectApps({ buildDir, entry, runtime, env: row.env_vars, timeoutMs: remaining(), signal: ctx.signal, onLog, dataDir });
  if (apps.length === 0 && runtime === 'python') {
    throw new BuildError(`${row.entrypoint_rel_path} registered no app: call kernel.App(name) and decorate a function with @app.action(name) at the top level of the entrypoint`);
  }
  if (apps.length === 0) {
    throw new BuildError(`${row.entrypoint_rel_path} registered no app: call new Kernel().app(name) and app.action(name, handler) at the top level of the entrypoint`);
  }
  return { entry, runtime, checksum, apps };
}

/** A stored upload into the build dir: a zip extracted, a single file as the entrypoint. */
async function placeUpload(stored: string, entrypoint: string, buildDir: string, settings: AppsSettings): Promise<void> {
  if (await isZipFile(stored)) {
    await extractZip(stored, buildDir, settings);
    return;
  }
  const dest = path.join(buildDir, ...safeRelativePath(entrypoint, 'entrypoint_rel_path'));
  await mkdir(path.dirname(dest), { recursive: true, mode: 0o755 });
  await copyFile(stored, dest);
  // The store keeps uploads 0600 (root's); the runner reads the build as another uid.
  await chmod(dest, 0o644);
}

async function copyGitTree(stored: string, sub: string | null, buildDir: string, settings: AppsSettings): Promise<void> {
  let from = stored;
  if (sub !== null) {
    from = path.join(stored, ...safeRelativePath(sub, 'source.path'));
    // A path through a link the repository holds must not lead out of it.
    const real = await realpath(from).catch(() => undefined);
    if (real === undefined || !(real === stored || real.startsWith(stored + path.sep))) throw new BuildError(`path ${JSON.stringify(sub)} is not a directory of the repository`);
    if (!(await lstat(real)).isDirectory()) throw new BuildError(`path ${JSON.stringify(sub)} is not a directory of the repository`);
    from = real;
  }
  await checkTreeSize(from, settings);
  // Links are copied as they are: the build and the app see them only inside the sandbox.
  await cp(from, buildDir, { recursive: true, verbatimSymlinks: true, force: false, errorOnExist: false });
}

async function checkTreeSize(dir: string, settings: AppsSettings): Promise<void> {
  let files = 0;
  let bytes = 0;
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      files++;
      if (files > settings.maxFiles) throw new BuildError(`the source holds more than ${settings.maxFiles} files (BROWSERPLANE_APP_MAX_FILES)`);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) bytes += (await lstat(full)).size;
      if (bytes > settings.maxUnpackedBytes) throw new BuildError(`the source is larger than ${settings.maxUnpackedBytes} bytes (BROWSERPLANE_APP_MAX_UNPACKED_MB)`);
    }
  };
  await walk(dir);
}

async function checkEntrypoint(buildDir: string, entrypoint: string): Promise<void> {
  const parts = safeRelativePath(entrypoint, 'entrypoint_rel_path');
  const info = await lstat(path.join(buildDir, ...parts)).catch(() => undefined);
  if (!info?.isFile()) throw new BuildError(`the entrypoint ${entrypoint} is not a file of the source`);
  if (!TS_ENTRY.test(entrypoint) && !JS_ENTRY.test(entrypoint) && !PY_ENTRY.test(entrypoint)) throw new BuildError(`the entrypoint ${entrypoint} is not a .js, .mjs, .cjs, .ts or .py file`);
}

interface StepOptions {
  dataDir: string;
  signal: AbortSignal;
  onLog: (stream: LogStream, line: string) => void;
}

const exists = (file: string) => lstat(file).then((info) => info.isFile(), () => false);

async function installDependencies(buildDir: string, options: StepOptions & { timeoutMs: () => number }): Promise<void> {
  const manifest = path.join(buildDir, 'package.json');
  if (!(await exists(manifest))) {
    options.onLog('stdout', `no package.json: installing @onkernel/sdk ${DEFAULT_SDK_VERSION}`);
    // Written as root into a tree the app's author made: 'wx' (O_EXCL) never follows a link
    // a git source may have planted under this name (to a host file: root would write it).
    await writeFile(manifest, JSON.stringify({ private: true, type: 'module', dependencies: { '@onkernel/sdk': DEFAULT_SDK_VERSION } }, null, 2) + '\n', { flag: 'wx' }).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code === 'EEXIST') throw new BuildError('package.json is not a regular file of the source (a link or a directory)');
        throw error;
      },
    );
  }
  const locked = await exists(path.join(buildDir, 'package-lock.json'));
  const args = [locked ? 'ci' : 'install', '--no-audit', '--no-fund', '--no-update-notifier', '--loglevel=warn'];
  options.onLog('stdout', `npm ${args.join(' ')}`);
  const result = await runSandboxed({
    command: 'npm',
    args,
    cwd: buildDir,
    writable: [buildDir],
    readable: [],
    env: { npm_config_cache: '/tmp/npm-cache', CI: 'true' },
    timeoutMs: options.timeoutMs(),
    signal: options.signal,
    onLog: options.onLog,
    network: true,
    dataDir: options.dataDir,
  });
  if (result.timedOut) throw new BuildError('npm took longer than the build may (BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS)');
  if (result.code !== 0) throw new BuildError(`npm ${args[0]} failed (exit ${result.code ?? result.signal})`);
}

/** The native esbuild binary of this platform (its JS wrapper would need more of node_modules inside the sandbox). */
function esbuildBinary(): string {
  const require = createRequire(import.meta.url);
  return require.resolve(`@esbuild/${process.platform}-${process.arch}/bin/esbuild`);
}

async function transpile(buildDir: string, entry: string, options: StepOptions & { timeoutMs: number }): Promise<void> {
  const binary = esbuildBinary();
  options.onLog('stdout', `bundling ${entry} into ${BUILT_ENTRY}`);
  const result = await runSandboxed({
    command: binary,
    args: [entry, '--bundle', '--platform=node', '--format=esm', '--target=node20', '--packages=external', `--outfile=${BUILT_ENTRY}`, '--log-level=warning'],
    cwd: buildDir,
    writable: [buildDir],
    readable: [path.dirname(binary)],
    env: {},
    timeoutMs: options.timeoutMs,
    signal: options.signal,
    onLog: options.onLog,
    network: false,
    dataDir: options.dataDir,
  });
  if (result.timedOut) throw new BuildError('transpiling the entrypoint took longer than the build may');
  if (result.code !== 0) throw new BuildError(`esbuild could not transpile ${entry} (exit ${result.code ?? result.signal})`);
}
