import { execFile, execFileSync } from 'node:child_process';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from './support/sdk.js';
import { cleanupServices, REPO_ROOT, startService, type RunningService } from '../support/service.js';

/**
 * Kernel's CLI on the wire, through the SDK it is built on: test/go-client, a Go program
 * on github.com/onkernel/kernel-go-sdk v0.24.0 (from the Go module proxy; built by
 * scripts/go-client.sh into a cache dir outside the checkout), does what `kernel deploy`
 * and `kernel invoke` do: deploys a zip whose entries have mode 0 with env vars as
 * env_vars.KEY fields, follows the deployment's events until running, then invokes async
 * and follows each invocation's events to its result. Real npm installs the app's
 * @onkernel/sdk. Needs the `go` tool: skipped, and says so, without it.
 */

const hasGo = (() => {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!hasGo) console.warn('go-client.test.ts: no `go` tool on PATH, the Go client checks are skipped');

interface Invoked {
  create_status: string;
  logs: string[] | null;
  status: string;
  output: string;
  status_reason: string;
  stream_error: string;
}
interface Report {
  deploy: { id: string; events: string[]; summaries: string[]; summary_env: Record<string, string>; actions: string[]; status: string; status_reason: string; stream_error: string };
  invokes: Record<string, Invoked>;
  errors: string[] | null;
}

let service: RunningService;
let report: Report;
const appName = unique('go-app');

beforeAll(async () => {
  if (!hasGo) return;
  const { stdout: built } = await promisify(execFile)(path.join(REPO_ROOT, 'scripts/go-client.sh'), [], { timeout: 540_000 });
  const binary = built.trim().split('\n').at(-1)!;
  service = await startService();
  const { stdout } = await promisify(execFile)(binary, [appName], {
    env: { ...process.env, KERNEL_BASE_URL: service.url, KERNEL_API_KEY: service.adminKey },
    timeout: 480_000,
  });
  report = JSON.parse(stdout) as Report;
  console.info(`Go client: ${stdout.trim()}`);
}, 1_080_000);
afterAll(async () => {
  await cleanupServices();
});

describe.skipIf(!hasGo)('kernel deploy / kernel invoke on the wire (Go SDK 0.24.0)', () => {
  it('makes every call without an error', () => {
    expect(report.errors).toBeNull();
    expect(report.deploy.stream_error).toBe('');
  });

  it('deploys with env_vars.KEY fields: the build runs to running, each app summarised before the running state', () => {
    expect(report.deploy).toMatchObject({ status: 'running', status_reason: '', summaries: [`${appName}@v1`], actions: ['env', 'fail'] });
    // Redacted as for any API-key caller; the app gets the values (below).
    expect(report.deploy.summary_env).toEqual({ FOO: '', B: '', ENTRYPOINT_RELPATH: '' });
    const states = report.deploy.events.filter((event) => event.startsWith('deployment_state'));
    expect(states).toEqual(['deployment_state:queued', 'deployment_state:in_progress', 'deployment_state:running']);
    expect(report.deploy.events.indexOf('app_version_summary')).toBeLessThan(report.deploy.events.indexOf('deployment_state:running'));
  });

  it('extracts the zip\'s mode-0 entries readable (0644), as the CLI\'s zipper writes them', async () => {
    const built = path.join(service.dataDir, 'apps', 'builds', report.deploy.id);
    for (const file of ['index.js', 'lib/greet.js', 'package.json']) expect(((await stat(path.join(built, file))).mode & 0o777).toString(8)).toBe('644');
  });

  it('answers the async invoke queued, then follows it to its output; the action saw the env vars and ENTRYPOINT_RELPATH', () => {
    const env = report.invokes.env!;
    expect(env).toMatchObject({ create_status: 'queued', status: 'succeeded', stream_error: '' });
    // ENTRYPOINT_RELPATH is the platform's (as Kernel's CLI says): the deployment's own value is overridden.
    expect(JSON.parse(env.output)).toEqual({ foo: 'bar', spaced: 'x y', entry: 'index.js', greeting: 'hello go' });
    expect(env.logs).toContain('env action for go');
  });

  it('shows a failed action\'s error in output, which is all kernel invoke prints', () => {
    const fail = report.invokes.fail!;
    expect(fail).toMatchObject({ create_status: 'queued', status: 'failed', status_reason: 'failing on purpose', stream_error: '' });
    expect(JSON.parse(fail.output)).toEqual({ error: 'failing on purpose' });
  });

  it('puts the invocation\'s log lines on the deployment\'s stream, which kernel logs <app> reads (since=5m)', async () => {
    const headers = { authorization: `Bearer ${service.adminKey}` };
    const apps = (await (await fetch(`${service.url}/apps?app_name=${appName}&version=v1`, { headers })).json()) as { deployment: string }[];
    expect(apps).toHaveLength(1);
    const res = await fetch(`${service.url}/deployments/${apps[0]!.deployment}/events?since=5m`, { headers });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"message":"env action for go"');
  });
});
