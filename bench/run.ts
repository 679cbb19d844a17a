/**
 * API overhead benchmark. Starts the built service as a user would (embedded Postgres,
 * a fresh data dir, a configured admin key), then drives it with autocannon over
 * loopback. Figures are printed as ratios against GET /healthz measured in the same run:
 * the cost of authentication and the Postgres round trips, not of express itself.
 */
import type autocannon from 'autocannon';
import { post, runAutocannon, type Scenario } from './load-support.js';
import { cleanupServices, startService } from '../test/support/service.js';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

async function main(): Promise<void> {
  const service = await startService({ inheritEnv: true, echoStderr: true });
  const key = service.adminKey;
  try {
    const url = service.url;
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const project = (await (await post(url, '/org/projects', { name: 'bench' }, auth)).json()) as { id: string };
    for (let i = 0; i < 20; i++) await post(url, '/org/api_keys', { name: `k${i}` }, auth);
    const credential = (await (
      await post(url, '/credentials', { name: 'bench', domain: 'example.com', values: { u: 'p' }, totp_secret: 'JBSWY3DPEHPK3PXP' }, auth)
    ).json()) as { id: string };
    for (let i = 0; i < 20; i++) {
      await post(url, '/invocations', { app_name: 'bench', action_name: `a${i}`, version: '1', async: true }, auth);
    }

    let n = 0;
    const scenarios: Scenario[] = [
      { name: 'GET /healthz (baseline: no auth, no database)', path: '/healthz' },
      { name: 'GET /org/projects/{id} (auth + lookup)', path: `/org/projects/${project.id}` },
      { name: 'GET /org/api_keys?limit=20 (auth + list)', path: '/org/api_keys?limit=20' },
      { name: 'GET /credentials/{id}/totp-code (auth + unseal + TOTP)', path: `/credentials/${credential.id}/totp-code` },
      { name: 'GET /invocations?limit=20 (auth + project + list)', path: '/invocations?limit=20' },
      { name: 'POST /org/projects (auth + insert)', method: 'POST', path: '/org/projects', body: () => JSON.stringify({ name: `p-${n++}` }) },
    ];
    const rows: { scenario: Scenario; result: autocannon.Result }[] = [];
    for (const scenario of scenarios) {
      rows.push({ scenario, result: await runAutocannon(url, scenario, auth, { connections: CONNECTIONS, durationS: DURATION_S }) });
    }

    const base = rows[0]!.result;
    console.log(`\nAPI overhead: ${CONNECTIONS} connections, ${DURATION_S} s each, loopback, 2 cores shared with the server\n`);
    console.log('| scenario | req/s | p50 ms | p99 ms | req/s vs baseline | non-2xx |');
    console.log('|---|---|---|---|---|---|');
    for (const { scenario, result } of rows) {
      const ratio = result.requests.average / base.requests.average;
      console.log(
        `| ${scenario.name} | ${result.requests.average.toFixed(0)} | ${result.latency.p50} | ${result.latency.p99} | ${ratio.toFixed(2)}x | ${result.non2xx} |`,
      );
    }
  } finally {
    await service.stop();
    await cleanupServices();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
