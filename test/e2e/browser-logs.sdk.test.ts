import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError } from '@onkernel/sdk';
import type { LogEvent } from '@onkernel/sdk/resources/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection, unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/** browsers.logs.stream through @onkernel/sdk 0.84.0, against the built service with a real Chromium. */

let service: RunningService;
let admin: Kernel;
let id: string;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
  id = (await admin.browsers.create({ headless: true, timeout_seconds: 300 })).session_id;
}, 120_000);
afterAll(async () => {
  await admin?.browsers.deleteByID(id).catch(() => undefined);
  await cleanupServices();
});

async function messages(stream: AsyncIterable<LogEvent>): Promise<string[]> {
  const out: string[] = [];
  for await (const event of stream) out.push(event.message);
  return out;
}

describe('browsers.logs.stream through the SDK', () => {
  it('reads a file the fs API wrote, and ends without follow', async () => {
    await admin.browsers.fs.writeFile(id, 'one\ntwo\n', { path: '/sdk/app.log' });
    const stream = await admin.browsers.logs.stream(id, { source: 'path', path: '/sdk/app.log', follow: false });
    expect(await messages(stream)).toEqual(['one', 'two']);
  });

  it('follows a file: a line a process appends arrives on the open stream', async () => {
    await admin.browsers.fs.writeFile(id, 'start\n', { path: '/sdk/follow.log' });
    const stream = await admin.browsers.logs.stream(id, { source: 'path', path: '/sdk/follow.log', follow: true });
    const seen: LogEvent[] = [];
    for await (const event of stream) {
      seen.push(event);
      if (event.message === 'start') await admin.browsers.process.exec(id, { command: 'sh', args: ['-c', 'echo from-process >> /sdk/follow.log'] });
      if (event.message === 'from-process') break;
    }
    expect(seen.map((event) => event.message)).toEqual(['start', 'from-process']);
    expect(seen[1]).toMatchObject({ event: 'log', timestamp: expect.any(String) });
  });

  it("reads the agent's and Chromium's own lines", async () => {
    const agent = await messages(await admin.browsers.logs.stream(id, { source: 'supervisor', supervisor_process: 'agent', follow: false }));
    expect(agent.some((line) => line.includes('"msg":"browser ready"'))).toBe(true);
    const all = await messages(await admin.browsers.logs.stream(id, { source: 'supervisor', follow: false }));
    expect(all.some((line) => line.startsWith('[chromium] '))).toBe(true);
  });

  it('refuses a bad query, a missing file and a path out of the browser, before streaming', async () => {
    await rejection(admin.browsers.logs.stream(id, { source: 'path' }), BadRequestError);
    await rejection(admin.browsers.logs.stream(id, { source: 'supervisor', supervisor_process: 'sshd' }), BadRequestError);
    await rejection(admin.browsers.logs.stream(id, { source: 'path', path: '/sdk/none.log' }), NotFoundError);
    await rejection(admin.browsers.logs.stream(id, { source: 'path', path: '/../etc/passwd' }), BadRequestError);
  });

  it("answers 404 to another project's key", async () => {
    const project = await admin.projects.create({ name: unique('logs-other') });
    const other = service.client((await admin.apiKeys.create({ name: unique('logs-key'), project_id: project.id })).key);
    await rejection(other.browsers.logs.stream(id, { source: 'supervisor', follow: false }), NotFoundError);
  });
});
