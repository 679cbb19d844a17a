import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { runAction, type ActionResult } from '../runner.js';
import { appsDir, buildDirOf } from '../settings.js';
import { extractBundle } from './bundle.js';
import { createLogShipper } from './log-shipper.js';
import { reportResult, type JobOutcome } from './report.js';
import { SubjectEndedError, type WireClient } from './wire-client.js';

/**
 * `invoke <invocationId> <app> <action>`: the run pod. It reads its invocation (payload,
 * env with the invocation's own key, timeout), extracts the deployment's bundle to the
 * path the build had (apps/builds/<deployment id>), runs the action with runner.ts as
 * embedded mode does, ships its stdout and stderr lines, and reports the result. A
 * SIGTERM (the Job deleted, its deadline passed) ends the action and reports 'cancelled'.
 */

export interface RunInput {
  invocation_id: string;
  deployment_id: string;
  app_name: string;
  action_name: string;
  entry: string;
  runtime: 'node' | 'python';
  payload: string | null;
  timeout_ms: number;
  env: Record<string, string>;
}

export interface RunArgs {
  workDir: string;
  invocationId: string;
  appName: string;
  actionName: string;
  signal: AbortSignal;
}

const RESULT_PATH = '/internal/app-jobs/run/result';

export async function runInvokeJob(client: WireClient, args: RunArgs): Promise<JobOutcome> {
  let input: RunInput;
  try {
    input = await client.getJson<RunInput>('/internal/app-jobs/run');
  } catch (error) {
    if (error instanceof SubjectEndedError) return 'ended';
    throw error;
  }
  const mismatch = mismatchOf(input, args);
  if (mismatch) return reportResult(client, RESULT_PATH, { ok: false, error: mismatch });

  const abort = new AbortController();
  const onCancel = () => abort.abort();
  args.signal.addEventListener('abort', onCancel, { once: true });
  let ended = false;
  const shipper = createLogShipper(client, {
    onEnded: () => {
      ended = true;
      abort.abort();
    },
  });
  let result: ActionResult;
  try {
    result = await run(client, input, args.workDir, abort.signal, (stream, line) => shipper.push(stream, line));
  } catch (error) {
    if (error instanceof SubjectEndedError) ended = true;
    result = { ok: false, error: abort.signal.aborted ? 'cancelled' : `the run could not start: ${error instanceof Error ? error.message : String(error)}` };
  } finally {
    args.signal.removeEventListener('abort', onCancel);
  }
  await shipper.close();
  if (ended) return 'ended';
  return reportResult(client, RESULT_PATH, result);
}

function mismatchOf(input: RunInput, args: RunArgs): string | undefined {
  const given = [args.invocationId, args.appName, args.actionName];
  const named = [input.invocation_id, input.app_name, input.action_name];
  // The deployment id becomes a path (apps/builds/<id>): an id, never a path of its own.
  if (!/^[A-Za-z0-9_-]+$/.test(input.deployment_id)) return `the run input names a deployment id that is not one: ${JSON.stringify(input.deployment_id)}`;
  if (given.every((value, i) => value === named[i])) return undefined;
  return `the run pod was started for ${given.join(' ')} but its token names ${named.join(' ')}`;
}

async function run(client: WireClient, input: RunInput, workDir: string, signal: AbortSignal, onLog: (stream: 'stdout' | 'stderr', line: string) => void): Promise<ActionResult> {
  await mkdir(appsDir(workDir), { recursive: true, mode: 0o711 });
  const bundle = path.join(appsDir(workDir), 'bundle.tar.gz');
  await client.download('/internal/app-jobs/run/bundle', bundle);
  signal.throwIfAborted();
  const buildDir = buildDirOf(workDir, input.deployment_id);
  await extractBundle(bundle, buildDir);
  await rm(bundle, { force: true });
  signal.throwIfAborted();
  return runAction({
    buildDir,
    entry: input.entry,
    runtime: input.runtime,
    env: input.env,
    timeoutMs: input.timeout_ms,
    signal,
    onLog,
    dataDir: workDir,
    appName: input.app_name,
    actionName: input.action_name,
    payload: input.payload,
    invocationId: input.invocation_id,
  });
}
