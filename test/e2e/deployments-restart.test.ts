import { toFile } from '@onkernel/sdk';
import yazl from 'yazl';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupServices, startService } from '../support/service.js';

/**
 * What a restart does to builds (docs/apps.md, "Restarts"): the deployment that was
 * building fails with a reason, the queued one behind it is built by the new process,
 * deleting a deployment mid-build aborts it, and deleting a running one stops its runs.
 */

afterAll(cleanupServices);

async function zip(files: Record<string, string>): Promise<Buffer> {
  const z = new yazl.ZipFile();
  for (const [name, text] of Object.entries(files)) z.addBuffer(Buffer.from(text), name);
  z.end();
  const chunks: Buffer[] = [];
  for await (const chunk of z.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** An app whose npm install hangs in its preinstall script: a build that stays in_progress. */
const slowApp = (name: string) =>
  zip({
    'package.json': JSON.stringify({ name, version: '1.0.0', private: true, type: 'module', scripts: { preinstall: 'sleep 600' }, dependencies: { '@onkernel/sdk': '0.84.0' } }),
    'index.js': `import Kernel from '@onkernel/sdk';\nnew Kernel().app('${name}').action('a', async (ctx) => ctx && 1);\n`,
  });

const quickApp = (name: string) => toFile(Buffer.from(`import Kernel from '@onkernel/sdk';\nnew Kernel().app('${name}').action('a', async (ctx: unknown) => ctx && 1);\n`), 'index.ts');

describe('builds and deletes across a deployment\'s life', () => {
  it('fails the build that was running, builds the queued one', async () => {
    const first = await startService();
    const client = first.client();
    const slow = await client.deployments.create({ file: await toFile(await slowApp('slow'), 'slow.zip'), entrypoint_rel_path: 'index.js' });
    await expect.poll(async () => (await client.deployments.retrieve(slow.id)).status, { timeout: 60_000, interval: 100 }).toBe('in_progress');
    const queued = await client.deployments.create({ file: await quickApp('after-restart'), entrypoint_rel_path: 'index.ts' });
    expect((await client.deployments.retrieve(queued.id)).status).toBe('queued');
    await first.kill();

    const second = await startService({ dataDir: first.dataDir });
    const again = second.client();
    await expect.poll(async () => (await again.deployments.retrieve(slow.id)).status, { timeout: 60_000, interval: 100 }).toBe('failed');
    expect((await again.deployments.retrieve(slow.id)).status_reason).toBe('The service restarted while this deployment was building; deploy it again');
    for await (const frame of await again.deployments.follow(queued.id)) void frame;
    const built = await again.deployments.retrieve(queued.id);
    expect(built.status, built.status_reason).toBe('running');
    expect((await again.apps.list()).getPaginatedItems().map((a) => a.app_name)).toEqual(['after-restart']);
  });

  it('fails the build it runs when the service stops (SIGTERM)', async () => {
    const first = await startService();
    const client = first.client();
    const slow = await client.deployments.create({ file: await toFile(await slowApp('stopping'), 'slow.zip'), entrypoint_rel_path: 'index.js' });
    await expect.poll(async () => (await client.deployments.retrieve(slow.id)).status, { timeout: 60_000, interval: 100 }).toBe('in_progress');
    expect(await first.stop()).toEqual({ code: 0, signal: null });
    const second = await startService({ dataDir: first.dataDir });
    expect(await second.client().deployments.retrieve(slow.id)).toMatchObject({ status: 'failed', status_reason: expect.stringMatching(/^The service is shutting down/) });
  });

  it('aborts a build when its deployment is deleted', async () => {
    const service = await startService();
    const client = service.client();
    const slow = await client.deployments.create({ file: await toFile(await slowApp('doomed'), 'slow.zip'), entrypoint_rel_path: 'index.js' });
    await expect.poll(async () => (await client.deployments.retrieve(slow.id)).status, { timeout: 60_000, interval: 100 }).toBe('in_progress');
    const started = Date.now();
    await client.deployments.delete(slow.id);
    const frames: string[] = [];
    for await (const frame of await client.deployments.follow(slow.id)) if (frame.event === 'deployment_state') frames.push(frame.deployment.status);
    expect(frames.at(-1)).toBe('stopped');
    const stopped = await client.deployments.retrieve(slow.id);
    expect(stopped).toMatchObject({ status: 'stopped', status_reason: 'Deleted with DELETE /deployments/{id}' });
    // The sleeping install is gone with its sandbox: the next build starts at once.
    const next = await client.deployments.create({ file: await quickApp('next'), entrypoint_rel_path: 'index.ts' });
    for await (const frame of await client.deployments.follow(next.id)) void frame;
    expect((await client.deployments.retrieve(next.id)).status).toBe('running');
    expect(Date.now() - started).toBeLessThan(60_000);
    // Deleting again changes nothing.
    await client.deployments.delete(slow.id);
    expect(await client.deployments.retrieve(slow.id)).toEqual(stopped);
  });

  it('stops the running invocations of a deployment it deletes', async () => {
    const service = await startService();
    const client = service.client();
    const app = toFile(Buffer.from(`import Kernel from '@onkernel/sdk';\nnew Kernel().app('sleeper').action('sleep', async (_ctx: unknown) => { await new Promise((r) => setTimeout(r, 600_000)); return 1; });\n`), 'index.ts');
    const deployment = await client.deployments.create({ file: await app, entrypoint_rel_path: 'index.ts' });
    for await (const frame of await client.deployments.follow(deployment.id)) void frame;
    expect((await client.deployments.retrieve(deployment.id)).status).toBe('running');
    const invocation = await client.invocations.create({ app_name: 'sleeper', action_name: 'sleep', version: 'latest', async: true });
    await expect.poll(async () => (await client.invocations.retrieve(invocation.id)).status, { timeout: 30_000, interval: 100 }).toBe('running');
    await client.deployments.delete(deployment.id);
    expect(await client.invocations.retrieve(invocation.id)).toMatchObject({ status: 'failed', status_reason: 'Its deployment was deleted' });
    expect((await client.apps.list()).getPaginatedItems()).toEqual([]);
  });
});
