import { cp, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Queryable } from '../../api/src/db/pool.js';
import { packageRoot } from '../../api/src/paths.js';

/**
 * A hand-made build dir as the build leaves one: <data dir>/apps/builds/<deployment id>/
 * with the app's files and node_modules/@onkernel/sdk (the repo's real SDK, copied: the
 * sandbox sees nothing outside the build dir). Readable by the run's uid, as a build is.
 */
export async function makeBuildDir(dataDir: string, deploymentId: string, files: Record<string, string>): Promise<string> {
  const builds = path.join(dataDir, 'apps', 'builds');
  const dir = path.join(builds, deploymentId);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  await cp(path.join(packageRoot(), 'node_modules', '@onkernel', 'sdk'), path.join(dir, 'node_modules', '@onkernel', 'sdk'), { recursive: true, dereference: true });
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true, mode: 0o755 });
    await writeFile(path.join(dir, name), text, { mode: 0o644 });
  }
  return dir;
}

/** An ESM app with actions that echo, throw, hang, log and read their env. */
export const ESM_APP = `
import { Kernel } from '@onkernel/sdk';
const kernel = new Kernel();
const app = kernel.app('demo');
app.action('echo', async (ctx, payload) => ({ invocation: ctx.invocation_id, payload }));
app.action('nothing', async (ctx) => undefined);
app.action('fail', async (ctx) => { throw new Error('the action broke on purpose'); });
app.action('hang', async (ctx) => new Promise(() => setInterval(() => {}, 1000)));
app.action('log', async (ctx) => { console.log('line one'); console.error('line two'); return 'logged'; });
app.action('env', async (ctx) => ({ greeting: process.env.GREETING ?? null, base: process.env.KERNEL_BASE_URL ?? null, hasKey: Boolean(process.env.KERNEL_API_KEY) }));
app.action('self', async (ctx) => {
  const res = await fetch(process.env.KERNEL_BASE_URL + '/invocations/' + ctx.invocation_id, { headers: { authorization: 'Bearer ' + process.env.KERNEL_API_KEY } });
  const body = await res.json();
  return { status: res.status, invocation: body.status, key: process.env.KERNEL_API_KEY };
});
app.action('secret', async (ctx) => { const fs = await import('node:fs'); try { return fs.readFileSync(process.env.SECRET_PATH, 'utf8'); } catch (e) { return 'refused: ' + e.code; } });
`;

/** The same framework loaded through require: the CommonJS instance of the SDK. */
export const CJS_APP = `
const { Kernel } = require('@onkernel/sdk');
const app = new Kernel().app('cjs-demo');
app.action('hello', async (ctx, payload) => 'hello ' + (payload && payload.name));
`;

let deploymentSeq = 0;

/**
 * What a finished build leaves, made by hand: a deployment row, its build dir and one live
 * app_versions row per app (until the deploy route builds them itself).
 */
export async function deployByHand(
  db: Queryable,
  dataDir: string,
  projectId: string,
  app: { appName: string; version: string; entry: string; files: Record<string, string>; actions: string[]; envVars?: Record<string, string> },
): Promise<string> {
  const deploymentId = `dep_hand${Date.now().toString(36)}${++deploymentSeq}`;
  const { rows } = await db.query<{ org_id: string }>('SELECT org_id FROM projects WHERE id = $1', [projectId]);
  const orgId = rows[0]!.org_id;
  const now = new Date();
  await db.query(
    `INSERT INTO deployments (id, org_id, project_id, status, entrypoint_rel_path, env_vars, version, source_type, created_at, updated_at)
     VALUES ($1, $2, $3, 'running', $4, $5, $6, 'file', $7, $7)`,
    [deploymentId, orgId, projectId, app.entry, JSON.stringify(app.envVars ?? {}), app.version, now],
  );
  await makeBuildDir(dataDir, deploymentId, app.files);
  await db.query(
    `INSERT INTO app_versions (id, org_id, project_id, deployment_id, app_name, version, runtime, entry, actions, env_vars, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'node', $7, $8, $9, $10)`,
    [`apv_${deploymentId}`, orgId, projectId, deploymentId, app.appName, app.version, app.entry, JSON.stringify(app.actions.map((name) => ({ name }))), JSON.stringify(app.envVars ?? {}), now],
  );
  return deploymentId;
}
