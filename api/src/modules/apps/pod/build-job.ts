import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { buildDeployment, BuildError, type BuildOutput } from '../build.js';
import type { DeploymentRow } from '../deployments-store.js';
import { inspectApps } from '../inspect.js';
import { appsDir, buildDirOf, sourcePath, sourcesDir, type AppsSettings } from '../settings.js';
import { createLogShipper } from './log-shipper.js';
import { reportResult, type JobOutcome } from './report.js';
import { packBundle } from './bundle.js';
import { SubjectEndedError, WireError, type WireClient } from './wire-client.js';

/**
 * `build <deploymentId>`: the build pod. It reads its deployment from the API, fetches
 * an upload's source (a git source is fetched here by build.ts, as in embedded mode),
 * runs build.ts's steps in this pod (BROWSERPLANE_APP_SANDBOX=pod: the pod is the
 * sandbox), ships every log line, and hands the API the built tree and the apps it
 * registers, or the failure with the build's last lines.
 */

export interface BuildInput {
  deployment_id: string;
  entrypoint_rel_path: string;
  source_type: 'upload' | 'github';
  source_url: string | null;
  source_ref: string | null;
  source_path: string | null;
  source_checksum: string | null;
  git_token: string | null;
  env_vars: Record<string, string>;
  limits: { build_timeout_ms: number; max_unpacked_bytes: number; max_files: number };
}

/** Lines a failure's tail carries (as the embedded build queue's status_reason). */
const TAIL_LINES = 25;

export async function runBuildJob(client: WireClient, options: { workDir: string; deploymentId: string; signal: AbortSignal }): Promise<JobOutcome> {
  let input: BuildInput;
  try {
    input = await client.getJson<BuildInput>('/internal/app-jobs/build');
  } catch (error) {
    if (error instanceof SubjectEndedError) return 'ended';
    throw error;
  }
  if (input.deployment_id !== options.deploymentId) {
    return reportResult(client, '/internal/app-jobs/build/result', { ok: false, error: `the build pod was started for ${options.deploymentId} but its token names ${input.deployment_id}`, tail: [] });
  }
  const abort = new AbortController();
  const onCancel = () => abort.abort(new BuildError('the build was cancelled (its Job was deleted or ran past its deadline)'));
  options.signal.addEventListener('abort', onCancel, { once: true });
  const shipper = createLogShipper(client, { onEnded: () => abort.abort(new SubjectEndedError('the deployment ended')) });
  const tail: string[] = [];
  const log = (line: string) => {
    // npm's blank separator lines say nothing in a log view (as the embedded queue drops them).
    if (line.trim() === '') return;
    tail.push(line);
    if (tail.length > TAIL_LINES) tail.shift();
    shipper.push('stdout', line);
  };
  const settings = settingsOf(input, options.workDir);
  let result: object;
  try {
    const output = await build(client, input, settings, abort.signal, log);
    const bundle = path.join(appsDir(options.workDir), `bundle-${input.deployment_id}.tar.gz`);
    const bytes = await packBundle(buildDirOf(options.workDir, input.deployment_id), bundle);
    if (bytes > input.limits.max_unpacked_bytes) throw new BuildError(`the built app is ${bytes} bytes compressed, more than ${input.limits.max_unpacked_bytes} (BROWSERPLANE_APP_MAX_UNPACKED_MB)`);
    log(`uploading the built app (${bytes} bytes)`);
    await client.upload('/internal/app-jobs/build/bundle', bundle, 'application/gzip').catch((error: unknown) => {
      if (error instanceof WireError && error.status === 413) throw new BuildError(`the built app is ${bytes} bytes compressed, more than the API takes (BROWSERPLANE_APP_MAX_UNPACKED_MB)`);
      throw error;
    });
    result = { ok: true, entry: output.entry, runtime: output.runtime, checksum: output.checksum ?? null, apps: output.apps };
  } catch (error) {
    if (error instanceof SubjectEndedError || abort.signal.reason instanceof SubjectEndedError) {
      await shipper.close();
      return 'ended';
    }
    const reason = abort.signal.aborted ? (abort.signal.reason as Error).message : error instanceof BuildError ? error.message : `the build failed unexpectedly: ${error instanceof Error ? error.message : String(error)}`;
    if (!(error instanceof BuildError) && !abort.signal.aborted) process.stderr.write(`browserplane pod: the build failed unexpectedly: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    result = { ok: false, error: reason, tail: [...tail] };
  } finally {
    options.signal.removeEventListener('abort', onCancel);
  }
  await shipper.close();
  return reportResult(client, '/internal/app-jobs/build/result', result);
}

function settingsOf(input: BuildInput, workDir: string): AppsSettings {
  return {
    dataDir: workDir,
    // Unused: the upload was checked by the API when it was received.
    maxUploadBytes: 0,
    maxUnpackedBytes: input.limits.max_unpacked_bytes,
    maxFiles: input.limits.max_files,
    buildTimeoutMs: input.limits.build_timeout_ms,
    gitAllowLocal: false,
  };
}

async function build(client: WireClient, input: BuildInput, settings: AppsSettings, signal: AbortSignal, log: (line: string) => void): Promise<BuildOutput> {
  // A fresh pod's work dir is empty: git-source.ts makes its checkout dir inside this one.
  await mkdir(sourcesDir(settings.dataDir), { recursive: true, mode: 0o711 });
  if (input.source_type === 'upload') {
    if (!input.source_checksum || !/^[0-9a-f]{64}$/.test(input.source_checksum)) throw new Error(`the build input names no usable source checksum (${String(input.source_checksum)})`);
    const stored = sourcePath(settings.dataDir, input.source_checksum);
    await client.download('/internal/app-jobs/build/source', stored);
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(stored)) hash.update(chunk as Buffer);
    if (hash.digest('hex') !== input.source_checksum) throw new Error('the source the API sent does not match its checksum');
  }
  return buildDeployment(rowOf(input), { settings, inspectApps, gitToken: input.git_token ?? undefined, signal, log });
}

/** The deployment as build.ts reads it; the fields it does not read are placeholders. */
function rowOf(input: BuildInput): DeploymentRow {
  const now = new Date();
  return {
    id: input.deployment_id,
    org_id: '',
    project_id: '',
    status: 'in_progress',
    status_reason: null,
    entrypoint_rel_path: input.entrypoint_rel_path,
    env_vars: input.env_vars,
    version: '',
    force: false,
    source_type: input.source_type === 'upload' ? 'file' : 'github',
    source_url: input.source_url,
    source_ref: input.source_ref,
    source_path: input.source_path,
    source_checksum: input.source_checksum,
    created_at: now,
    updated_at: now,
  };
}
