import { mkdir } from 'node:fs/promises';
import { runBuildJob } from './build-job.js';
import { reportResult, type JobOutcome } from './report.js';
import { runInvokeJob } from './run-job.js';
import { createWireClient, type WireClient } from './wire-client.js';

/**
 * The runner image's entry point (docker/runner.Dockerfile): one app Job's pod.
 *
 *   build <deploymentId>                       (a build Job, app-jobs.ts buildJob)
 *   invoke <invocationId> <appName> <actionName>  (a run Job, app-jobs.ts runJob)
 *
 * From the Job: BROWSERPLANE_INTERNAL_URL (the API), BROWSERPLANE_APP_JOB_TOKEN (its
 * Secret), BROWSERPLANE_APP_SANDBOX=pod (the image), BROWSERPLANE_APP_WORK_DIR (default
 * /work, the pod's emptyDir; tests point it elsewhere). Exit 0 when the API took the
 * result or wanted none (409: the subject ended); non-zero when it could not be told, so
 * the Job fails and the API's watch of Jobs reports it.
 */

const USAGE = 'usage: job-main.js build <deploymentId> | invoke <invocationId> <appName> <actionName>';
/** After a SIGTERM, the most the pod waits for its work to stop before reporting 'cancelled' itself (the Job's grace is 5 s, app-jobs.ts). */
const CANCEL_GRACE_MS = 3000;

type Command = { kind: 'build'; deploymentId: string } | { kind: 'invoke'; invocationId: string; appName: string; actionName: string };

function parseArgs(argv: string[]): Command | undefined {
  const [kind, ...rest] = argv;
  // A deployment id becomes a path (apps/builds/<id>): only an id's characters.
  if (kind === 'build' && rest.length === 1 && /^[A-Za-z0-9_-]+$/.test(rest[0]!)) return { kind, deploymentId: rest[0]! };
  if (kind === 'invoke' && rest.length === 3 && rest.every(Boolean)) return { kind, invocationId: rest[0]!, appName: rest[1]!, actionName: rest[2]! };
  return undefined;
}

const EXIT: Record<JobOutcome, number> = { reported: 0, ended: 0, unreported: 1 };

async function main(): Promise<number> {
  const command = parseArgs(process.argv.slice(2));
  const baseUrl = process.env.BROWSERPLANE_INTERNAL_URL;
  const token = process.env.BROWSERPLANE_APP_JOB_TOKEN;
  if (!command || !baseUrl || !token) {
    process.stderr.write(`${USAGE}\n(with BROWSERPLANE_INTERNAL_URL and BROWSERPLANE_APP_JOB_TOKEN set)\n`);
    return 2;
  }
  const workDir = process.env.BROWSERPLANE_APP_WORK_DIR ?? '/work';
  await mkdir(workDir, { recursive: true });
  const client = createWireClient({ baseUrl, token });
  const cancel = new AbortController();
  const resultPath = command.kind === 'build' ? '/internal/app-jobs/build/result' : '/internal/app-jobs/run/result';
  process.once('SIGTERM', () => {
    cancel.abort();
    // Work that does not stop in time (a download) still gets its result reported.
    setTimeout(() => void cancelled(client, resultPath).then((code) => process.exit(code)), CANCEL_GRACE_MS).unref();
  });
  const outcome =
    command.kind === 'build'
      ? await runBuildJob(client, { workDir, deploymentId: command.deploymentId, signal: cancel.signal })
      : await runInvokeJob(client, { workDir, ...command, signal: cancel.signal });
  return EXIT[outcome];
}

async function cancelled(client: WireClient, resultPath: string): Promise<number> {
  const body = resultPath.includes('/build/') ? { ok: false, error: 'the build was cancelled (its Job was deleted or ran past its deadline)', tail: [] } : { ok: false, error: 'cancelled' };
  return EXIT[await reportResult(client, resultPath, body)];
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`browserplane pod: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
