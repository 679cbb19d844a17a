import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Kernel from '@onkernel/sdk';
import { APIError, BadRequestError, NotFoundError, toFile } from '@onkernel/sdk';
import type { DeploymentFollowResponse } from '@onkernel/sdk/resources/deployments';
import yazl from 'yazl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection, unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * Deployments with the real TS SDK against the built service: real npm (the registry is
 * reachable), real esbuild, real git, the real sandbox.
 */

let service: RunningService;
let admin: Kernel;
let scratch: string;
const UPLOAD_LIMIT_MB = 2;

beforeAll(async () => {
  service = await startService({ env: { BROWSERPLANE_APP_MAX_UPLOAD_MB: String(UPLOAD_LIMIT_MB), BROWSERPLANE_APP_GIT_ALLOW_LOCAL: 'true' } });
  admin = service.client();
  // World-searchable: the sandboxed git (its own uid) reads the test's bare repository.
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-deploy-'));
  await chmod(scratch, 0o755);
});
afterAll(async () => {
  await cleanupServices();
  await rm(scratch, { recursive: true, force: true });
});

const inNewProject = async () => {
  const project = await admin.projects.create({ name: unique('deploy') });
  return { project, client: service.client(undefined, { projectID: project.id }) };
};

const appSource = (appName: string, action = 'greet') => `
import Kernel from '@onkernel/sdk';
import { greeting } from './greeting.js';

const kernel = new Kernel();
const app = kernel.app(${JSON.stringify(appName)});
app.action(${JSON.stringify(action)}, async (_ctx: unknown, payload?: { name?: string }) => ({ text: greeting(payload?.name ?? 'world') }));
`;

/** Every frame of the deployment's event stream, to its end (the server closes it when terminal). */
async function follow(client: Kernel, id: string): Promise<DeploymentFollowResponse[]> {
  const frames: DeploymentFollowResponse[] = [];
  for await (const frame of await client.deployments.follow(id)) frames.push(frame);
  return frames;
}

async function zipOf(files: Record<string, string>, extra?: (zip: yazl.ZipFile) => void): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, text] of Object.entries(files)) zip.addBuffer(Buffer.from(text), name);
  extra?.(zip);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A single TypeScript file: no package.json, so the build installs @onkernel/sdk itself. */
const singleTs = async (appName: string) => {
  const text = appSource(appName).replace("import { greeting } from './greeting.js';\n", 'const greeting = (name: string) => `hello ${name}`;\n');
  return toFile(Buffer.from(text), 'index.ts');
};

/** A zip with package.json and the package-lock.json real npm makes for it. */
async function packagedZip(appName: string, dependencies: Record<string, string> = { '@onkernel/sdk': '0.84.0' }, lock = true): Promise<Buffer> {
  const dir = await mkdtemp(path.join(scratch, 'pkg-'));
  const manifest = JSON.stringify({ name: 'fixture-app', version: '1.0.0', private: true, type: 'module', dependencies }, null, 2);
  await writeFile(path.join(dir, 'package.json'), manifest);
  const files: Record<string, string> = {
    'package.json': manifest,
    'src/index.js': appSource(appName).replace(/: unknown|\?: \{ name\?: string \}/g, ''),
    'src/greeting.js': 'export const greeting = (name) => `hello ${name}`;\n',
  };
  if (lock) {
    execFileSync('npm', ['install', '--package-lock-only', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: dir, stdio: 'pipe', timeout: 120_000 });
    files['package-lock.json'] = await readFile(path.join(dir, 'package-lock.json'), 'utf8');
  }
  return zipOf(files);
}

describe('deploying with the SDK', () => {
  it('builds a single TypeScript file: events follow the build to running, GET /apps shows its action', async () => {
    const { client } = await inNewProject();
    const name = unique('ts-app');
    const created = await client.deployments.create({ file: await singleTs(name), entrypoint_rel_path: 'index.ts', env_vars: { GREETING: 'hi' }, region: 'aws.us-east-1a' });
    expect(created).toMatchObject({ status: 'queued', entrypoint_rel_path: 'index.ts', env_vars: { GREETING: '' }, region: 'aws.us-east-1a', source_type: 'file' });
    expect(created.source_checksum).toMatch(/^[0-9a-f]{64}$/);

    const frames = await follow(client, created.id);
    const states = frames.flatMap((f) => (f.event === 'deployment_state' ? [f.deployment.status] : []));
    const done = await client.deployments.retrieve(created.id);
    expect(done.status_reason ?? '').toBe('');
    expect(states).toEqual(['queued', 'in_progress', 'running']);
    expect(frames.some((f) => f.event === 'log' && f.message.includes('npm install'))).toBe(true);
    const summary = frames.find((f) => f.event === 'app_version_summary');
    expect(summary).toMatchObject({ app_name: name, version: 'latest', actions: [{ name: 'greet' }], env_vars: { GREETING: '' } });
    expect(done.status).toBe('running');

    const apps = (await client.apps.list({ app_name: name })).getPaginatedItems();
    expect(apps).toEqual([{ id: expect.any(String), app_name: name, version: 'latest', actions: [{ name: 'greet' }], deployment: created.id, env_vars: { GREETING: '' }, region: 'aws.us-east-1a' }]);
    // The TypeScript entry was bundled for the runner; the build dir is the shared layout.
    const built = path.join(service.dataDir, 'apps', 'builds', created.id);
    expect(await readdir(path.join(built, '.browserplane'))).toContain('entry.mjs');
    // Replayed from the start for a late follower, ending at once.
    const brief = (list: DeploymentFollowResponse[]) =>
      list.filter((f) => f.event !== 'sse_heartbeat').map((f) => (f.event === 'deployment_state' ? `state ${f.deployment.status}` : f.event === 'log' ? `log ${f.message}` : f.event));
    expect(brief(await follow(client, created.id))).toEqual(brief(frames));
    // since: only what happened from that instant on.
    const last = frames.findLast((f) => f.event === 'deployment_state')!;
    const tail: DeploymentFollowResponse[] = [];
    for await (const frame of await client.deployments.follow(created.id, { since: last.timestamp })) tail.push(frame);
    expect(brief(tail)).toEqual(brief(frames.filter((f) => f.event !== 'log' && Date.parse(f.timestamp) >= Date.parse(last.timestamp))));
    expect(brief(tail).at(-1)).toBe('state running');
  });

  it('builds a zip with package.json and package-lock.json (npm ci)', async () => {
    const { client } = await inNewProject();
    const name = unique('zip-app');
    const created = await client.deployments.create({ file: await toFile(await packagedZip(name), 'app.zip'), entrypoint_rel_path: 'src/index.js', version: '1.0.0' });
    const frames = await follow(client, created.id);
    const done = await client.deployments.retrieve(created.id);
    expect(done.status, done.status_reason).toBe('running');
    expect(frames.some((f) => f.event === 'log' && f.message.includes('npm ci'))).toBe(true);
    const apps = (await client.apps.list({ version: '1.0.0' })).getPaginatedItems();
    expect(apps.map((a) => [a.app_name, a.actions])).toEqual([[name, [{ name: 'greet' }]]]);
  });

  it('fails a build whose dependency does not exist, with npm\'s error in status_reason', async () => {
    const { client } = await inNewProject();
    const zip = await packagedZip(unique('bad-dep'), { '@onkernel/sdk': '0.84.0', 'browserplane-no-such-package-7f3a9c': '1.0.0' }, false);
    const created = await client.deployments.create({ file: await toFile(zip, 'app.zip'), entrypoint_rel_path: 'src/index.js' });
    await follow(client, created.id);
    const done = await client.deployments.retrieve(created.id);
    expect(done.status).toBe('failed');
    expect(done.status_reason).toMatch(/npm install failed/);
    expect(done.status_reason).toMatch(/E404|404 Not Found/);
    // Nothing runs from a failed build: its dir is gone.
    await expect.poll(() => existsSync(path.join(service.dataDir, 'apps', 'builds', created.id)), { timeout: 5000 }).toBe(false);
    expect((await client.apps.list()).getPaginatedItems()).toEqual([]);
  });

  it('keeps two versions side by side; the same version again fails unless forced, which replaces it', async () => {
    const { client } = await inNewProject();
    const name = unique('versions');
    const deploy = async (version: string, force?: boolean) => {
      const created = await client.deployments.create({ file: await singleTs(name), entrypoint_rel_path: 'index.ts', version, ...(force === undefined ? {} : { force }) });
      await follow(client, created.id);
      return client.deployments.retrieve(created.id);
    };
    const v1 = await deploy('1');
    const v2 = await deploy('2');
    expect([v1.status, v2.status]).toEqual(['running', 'running']);
    const versions = async () => (await client.apps.list({ app_name: name })).getPaginatedItems().map((a) => [a.version, a.deployment]).sort();
    expect(await versions()).toEqual([['1', v1.id], ['2', v2.id]]);

    // Offset pagination as the SDK's pager reads it: one per page, both reached.
    const paged: string[] = [];
    for await (const item of client.apps.list({ app_name: name, limit: 1 })) paged.push(item.version);
    expect(paged.sort()).toEqual(['1', '2']);
    const first = await client.apps.list({ app_name: name, limit: 1 });
    expect([first.getPaginatedItems().length, first.hasNextPage()]).toEqual([1, true]);

    const again = await deploy('1');
    expect(again.status).toBe('failed');
    expect(again.status_reason).toContain('already exists');
    expect(await versions()).toEqual([['1', v1.id], ['2', v2.id]]);

    const forced = await deploy('1', true);
    expect(forced.status).toBe('running');
    expect(await versions()).toEqual([['1', forced.id], ['2', v2.id]]);

    const listed = (await client.deployments.list({ app_version: '1' })).getPaginatedItems().map((d) => d.id);
    expect(listed).toEqual([forced.id, again.id, v1.id]);
    expect((await client.deployments.list({ app_name: name, limit: 1 })).getPaginatedItems()).toHaveLength(1);

    // Delete: stopped, its apps gone, the others stay.
    await client.deployments.delete(forced.id);
    expect((await client.deployments.retrieve(forced.id)).status).toBe('stopped');
    expect(await versions()).toEqual([['2', v2.id]]);
    expect(existsSync(path.join(service.dataDir, 'apps', 'builds', forced.id))).toBe(false);
    expect(existsSync(path.join(service.dataDir, 'apps', 'builds', v2.id))).toBe(true);
  });

  it('builds from a git repository (a local bare repository made with real git), sent by the SDK or as JSON', async () => {
    const { client, project } = await inNewProject();
    const name = unique('git-app');
    const work = await mkdtemp(path.join(scratch, 'git-work-'));
    const bare = path.join(scratch, `${path.basename(work)}.git`);
    await mkdir(path.join(work, 'app', 'src'), { recursive: true });
    await writeFile(path.join(work, 'app', 'src', 'index.ts'), appSource(name, 'from-git'));
    await writeFile(path.join(work, 'app', 'src', 'greeting.ts'), 'export const greeting = (name: string) => `hello ${name}`;\n');
    const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, stdio: 'pipe' });
    git(work, 'init', '-q', '-b', 'main');
    git(work, 'add', '.');
    git(work, 'commit', '-q', '-m', 'app');
    git(scratch, 'clone', '-q', '--bare', work, bare);
    execFileSync('chmod', ['-R', 'a+rX', bare]);
    const commit = git(work, 'rev-parse', 'HEAD').toString().trim();

    const created = await client.deployments.create({ source: { type: 'github', url: `file://${bare}`, ref: 'main', entrypoint: 'src/index.ts', path: 'app' } });
    expect(created).toMatchObject({ source_type: 'github', source_url: `file://${bare}`, source_ref: 'main', source_path: 'app', entrypoint_rel_path: 'src/index.ts' });
    await follow(client, created.id);
    const done = await client.deployments.retrieve(created.id);
    expect(done.status, done.status_reason).toBe('running');
    expect(done.source_checksum).toBe(commit);
    expect((await client.apps.list({ app_name: name })).getPaginatedItems()[0]?.actions).toEqual([{ name: 'from-git' }]);

    // The same source as plain JSON (curl's way; the SDK always sends multipart), forced over the first.
    const post = (body: unknown) =>
      fetch(`${service.url}/deployments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json', 'x-kernel-project-id': project.id },
        body: JSON.stringify(body),
      });
    const bad = await post({ version: '1' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ field: 'body.source' })] });
    const json = await post({ source: { type: 'github', url: `file://${bare}`, ref: 'main', entrypoint: 'src/index.ts', path: 'app' }, force: true });
    expect(json.status).toBe(200);
    const again = (await json.json()) as { id: string; status: string };
    expect(again.status).toBe('queued');
    await follow(client, again.id);
    expect((await client.deployments.retrieve(again.id)).status).toBe('running');
    expect((await client.apps.list({ app_name: name })).getPaginatedItems().map((a) => a.deployment)).toEqual([again.id]);
  });
});

describe('bad input', () => {
  const noNewDeployments = async (client: Kernel, attempt: () => Promise<unknown>) => {
    const before = (await client.deployments.list()).getPaginatedItems().length;
    await attempt();
    expect((await client.deployments.list()).getPaginatedItems()).toHaveLength(before);
  };

  it('refuses a request with neither file nor source, or with a bad region, naming the field', async () => {
    const { client } = await inNewProject();
    await noNewDeployments(client, async () => {
      const neither = await rejection(client.deployments.create({ entrypoint_rel_path: 'index.ts' }), BadRequestError);
      expect(neither.error).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ field: 'body.file' })] });
      const region = await rejection(
        client.deployments.create({ file: await singleTs('x'), entrypoint_rel_path: 'index.ts', region: 'eu-west' as 'aws.us-east-1a' }),
        BadRequestError,
      );
      expect(region.error).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ field: 'body.region' })] });
      const env = await rejection(client.deployments.create({ file: await singleTs('x'), entrypoint_rel_path: 'index.ts', env_vars: { 'BAD-NAME': 'x' } }), BadRequestError);
      expect(env.error).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ field: 'body.env_vars.BAD-NAME' })] });
      const local = await rejection(client.deployments.create({ source: { type: 'github', url: 'ssh://git@example.test/a.git', ref: 'main', entrypoint: 'index.ts' } }), BadRequestError);
      expect(local.error).toMatchObject({ code: 'invalid_source', details: [expect.objectContaining({ field: 'body.source.url' })] });
      const entry = await rejection(client.deployments.create({ file: await singleTs('x'), entrypoint_rel_path: 'index.rb' }), BadRequestError);
      expect(entry.error).toMatchObject({ code: 'invalid_entrypoint' });
    });
  });

  it('refuses a zip without the entrypoint, a zip-slip entry and a symlink entry; nothing is written outside', async () => {
    const { client } = await inNewProject();
    await noNewDeployments(client, async () => {
      const missing = await rejection(client.deployments.create({ file: await toFile(await zipOf({ 'main.js': '' }), 'a.zip'), entrypoint_rel_path: 'index.js' }), BadRequestError);
      expect(missing.error).toMatchObject({ code: 'invalid_entrypoint', details: [expect.objectContaining({ field: 'body.entrypoint_rel_path' })] });

      // yazl refuses to write "..", so the name is patched in the bytes after (same length).
      const slip = Buffer.from((await zipOf({ 'index.js': '', 'zz/evil.txt': 'pwned' })).toString('latin1').replaceAll('zz/evil.txt', '../evil.txt'), 'latin1');
      const escaped = await rejection(client.deployments.create({ file: await toFile(slip, 'a.zip'), entrypoint_rel_path: 'index.js' }), BadRequestError);
      expect(escaped.error).toMatchObject({ code: 'invalid_path', message: expect.stringContaining('../evil.txt') });

      const link = await zipOf({ 'index.js': '' }, (zip) => zip.addBuffer(Buffer.from('/etc/shadow'), 'shadow', { mode: 0o120777 }));
      const linked = await rejection(client.deployments.create({ file: await toFile(link, 'a.zip'), entrypoint_rel_path: 'index.js' }), BadRequestError);
      expect(linked.error).toMatchObject({ code: 'invalid_zip', message: expect.stringContaining('symbolic link') });
    });
    const apps = path.join(service.dataDir, 'apps');
    expect(await readdir(apps)).not.toContain('evil.txt');
  });

  it('refuses an upload past the limit with 413', async () => {
    const { client } = await inNewProject();
    await noNewDeployments(client, async () => {
      const big = Buffer.alloc((UPLOAD_LIMIT_MB + 1) * 1024 * 1024, 'a');
      const error = await rejection(client.deployments.create({ file: await toFile(big, 'index.js'), entrypoint_rel_path: 'index.js' }), APIError);
      expect(error.status).toBe(413);
      expect(error.error).toMatchObject({ code: 'upload_too_large', message: expect.any(String), details: expect.any(Array) });
    });
  });

  it('refuses bad list and follow queries', async () => {
    const { client } = await inNewProject();
    await rejection(client.deployments.list({ limit: 0 }), BadRequestError);
    await rejection(client.apps.list({ limit: 1000 }), BadRequestError);
    await rejection(client.deployments.retrieve('dep_nope'), NotFoundError);
    await rejection(client.deployments.delete('dep_nope'), NotFoundError);
    await rejection(client.deployments.follow('dep_nope'), NotFoundError);
  });
});

/** A bare repository of `files` (links as [target]) in the test's scratch dir, readable by the sandbox's uid; its URL. */
async function bareRepository(files: Record<string, string | [string]>): Promise<string> {
  const work = await mkdtemp(path.join(scratch, 'git-work-'));
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(work, name)), { recursive: true });
    if (typeof content === 'string') await writeFile(path.join(work, name), content);
    else await symlink(content[0], path.join(work, name));
  }
  const bare = `${work}.git`;
  const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], { cwd, stdio: 'pipe' });
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'add', '.');
  git(work, 'commit', '-q', '-m', 'app');
  git(scratch, 'clone', '-q', '--bare', work, bare);
  execFileSync('chmod', ['-R', 'a+rX', bare]);
  return `file://${bare}`;
}

describe('the build runs the app author\'s code confined', () => {
  it('bundles no host file a repository links to (esbuild runs in the sandbox)', async () => {
    const { client } = await inNewProject();
    const keyFile = path.join(service.dataDir, 'admin-api-key');
    expect((await readFile(keyFile, 'utf8')).trim()).toBe(service.adminKey);
    const url = await bareRepository({
      'index.ts': `import Kernel from '@onkernel/sdk';\nimport key from './key.txt';\nnew Kernel().app('leak').action('key', async (_ctx: unknown) => key);\n`,
      'key.txt': [keyFile],
    });
    const created = await client.deployments.create({ source: { type: 'github', url, ref: 'main', entrypoint: 'index.ts' } });
    await follow(client, created.id);
    const done = await client.deployments.retrieve(created.id);
    expect(done.status).toBe('failed');
    expect(done.status_reason).toMatch(/esbuild could not transpile/);
    expect(done.status_reason).not.toContain(service.adminKey);
    // As root, esbuild would have read the link's target and the app would be running.
    expect((await client.apps.list()).getPaginatedItems()).toEqual([]);
  });

  it('writes no file through a package.json the repository made a link (the service writes it as root)', async () => {
    const { client } = await inNewProject();
    const outside = path.join(scratch, `planted-${Date.now()}`);
    const url = await bareRepository({
      'index.js': `import Kernel from '@onkernel/sdk';\nnew Kernel().app('planted').action('a', async (_ctx) => 1);\n`,
      'package.json': [outside],
    });
    const created = await client.deployments.create({ source: { type: 'github', url, ref: 'main', entrypoint: 'index.js' } });
    await follow(client, created.id);
    const done = await client.deployments.retrieve(created.id);
    expect(done.status).toBe('failed');
    expect(done.status_reason).toMatch(/package\.json is not a regular file/);
    // Written through the link, the service's default manifest would now be there.
    await expect(readFile(outside, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('runs install scripts where the data dir is out of reach', async () => {
    const { client } = await inNewProject();
    const keyFile = path.join(service.dataDir, 'admin-api-key');
    const manifest = JSON.stringify({
      name: 'thief',
      type: 'module',
      version: '1.0.0',
      private: true,
      scripts: { preinstall: `echo ran > ran.txt; cat ${keyFile} > stolen.txt 2>/dev/null; ls ${service.dataDir} > listing.txt 2>/dev/null; true` },
      dependencies: { '@onkernel/sdk': '0.84.0' },
    });
    const zip = await zipOf({ 'package.json': manifest, 'index.js': "import Kernel from '@onkernel/sdk';\nnew Kernel().app('thief').action('a', async (ctx) => ctx && 1);\n" });
    const created = await client.deployments.create({ file: await toFile(zip, 'app.zip'), entrypoint_rel_path: 'index.js' });
    await follow(client, created.id);
    const built = path.join(service.dataDir, 'apps', 'builds', created.id);
    // The script ran (so the test can fail), and found nothing of the service.
    expect((await readFile(path.join(built, 'ran.txt'), 'utf8')).trim()).toBe('ran');
    expect(await readFile(path.join(built, 'stolen.txt'), 'utf8')).toBe('');
    expect(await readFile(path.join(built, 'listing.txt'), 'utf8')).not.toMatch(/postgres|admin-api-key/);
    const done = await client.deployments.retrieve(created.id);
    expect(done.status, done.status_reason).toBe('running');
  });
});

describe('isolation', () => {
  it('another project cannot see, follow or delete a deployment, nor see its apps', async () => {
    const a = await inNewProject();
    const b = await inNewProject();
    const name = unique('private');
    // A single .js file this time (no transpile: the runner loads the upload itself).
    const js = `import Kernel from '@onkernel/sdk';\nnew Kernel().app(${JSON.stringify(name)}).action('a', async (ctx) => ctx && 1);\n`;
    const created = await a.client.deployments.create({ file: await toFile(Buffer.from(js), 'index.js'), entrypoint_rel_path: 'index.js' });
    await rejection(b.client.deployments.retrieve(created.id), NotFoundError);
    await rejection(b.client.deployments.delete(created.id), NotFoundError);
    await rejection(b.client.deployments.follow(created.id), NotFoundError);
    expect((await b.client.deployments.list()).getPaginatedItems()).toEqual([]);
    await follow(a.client, created.id);
    const done = await a.client.deployments.retrieve(created.id);
    expect(done.status, done.status_reason).toBe('running');
    expect((await b.client.apps.list({ app_name: name })).getPaginatedItems()).toEqual([]);
    expect((await a.client.apps.list({ app_name: name })).getPaginatedItems()).toHaveLength(1);
  });
});
