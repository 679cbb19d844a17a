import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupServices, REPO_ROOT, startService, type RunningService } from '../support/service.js';

/**
 * The route count from outside (issue 19's "Done when", and issue 22's): scripts/sdk-routes.mjs
 * reads every route @onkernel/sdk 0.84.0 can call from the SDK's own code and calls each
 * against the built service, started as a user starts it; a route is unserved when it
 * answers 404 route_not_found (or 405). Every family must be served whole; any other route
 * is printed so the number stays visible.
 */

const SERVED_FAMILIES = [
  'browsers',
  'fs',
  'computer',
  'process',
  'logs',
  'playwright',
  'curl',
  'pools',
  'profiles',
  'proxies',
  'credentials',
  'api keys',
  'projects',
  'extensions',
  'auth connections',
  'deployments/apps',
  'replays',
  'audit logs',
  'telemetry',
  'credential providers',
  'org limits',
  'invocations',
] as const;

const SDK_ROUTES = 127;

interface Report {
  total: number;
  served: number;
  families: Record<string, { served: number; total: number; unserved: string[] }>;
}

let service: RunningService;
let report: Report;

beforeAll(async () => {
  service = await startService();
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(REPO_ROOT, 'scripts/sdk-routes.mjs'), '--json'], {
    cwd: REPO_ROOT,
    env: { ...process.env, KERNEL_BASE_URL: service.url, KERNEL_API_KEY: service.adminKey },
    maxBuffer: 16 << 20,
  });
  report = JSON.parse(stdout) as Report;
  const rest = Object.entries(report.families).filter(([name]) => !(SERVED_FAMILIES as readonly string[]).includes(name));
  console.info(
    [
      `SDK routes served: ${report.served}/${report.total}`,
      ...Object.entries(report.families).map(([name, f]) => `  ${name}: ${f.served}/${f.total}`),
      'unserved outside the families this issue serves:',
      ...rest.flatMap(([, f]) => f.unserved.map((route) => `  ${route}`)),
    ].join('\n'),
  );
}, 300_000);
afterAll(async () => {
  await cleanupServices();
});

describe('SDK routes served, counted from outside', () => {
  it(`finds the ${SDK_ROUTES} routes of @onkernel/sdk 0.84.0, each in a known family`, () => {
    expect(report.total).toBe(SDK_ROUTES);
    expect(report.families.other).toBeUndefined();
  });

  it(`serves all ${SDK_ROUTES}, and every family the script knows is in the list above`, () => {
    expect(Object.keys(report.families).sort()).toEqual([...SERVED_FAMILIES].sort());
    expect(report.served).toBe(SDK_ROUTES);
  });

  it.each(SERVED_FAMILIES)('serves every route of %s', (family) => {
    const counted = report.families[family];
    expect(counted, `no routes in family ${family}`).toBeDefined();
    expect(counted!.unserved).toEqual([]);
  });
});
