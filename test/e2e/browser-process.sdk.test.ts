import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/** browsers.process through @onkernel/sdk 0.84.0, against the built service with real Chromium and bubblewrap. */

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

const text = (b64: string | undefined) => Buffer.from(b64 ?? '', 'base64').toString('utf8');

describe('browsers.process through the SDK', () => {
  it('execs a command and reads a file the fs API wrote', async () => {
    await admin.browsers.fs.writeFile(id, 'from the fs api', { path: '/sdk/note.txt' });
    const result = await admin.browsers.process.exec(id, { command: 'cat', args: ['/sdk/note.txt'], timeout_sec: 30 });
    expect(result.exit_code).toBe(0);
    expect(text(result.stdout_b64)).toBe('from the fs api');
    const failed = await admin.browsers.process.exec(id, { command: 'sh', args: ['-c', 'echo err >&2; exit 4'] });
    expect(failed.exit_code).toBe(4);
    expect(text(failed.stderr_b64)).toBe('err\n');
  });

  it('spawns cat, writes its stdin, streams its output and ends it with kill', async () => {
    const spawned = await admin.browsers.process.spawn(id, { command: 'cat' });
    expect(spawned).toMatchObject({ process_id: expect.any(String), pid: expect.any(Number), started_at: expect.any(String) });
    const processId = spawned.process_id!;
    expect(await admin.browsers.process.status(processId, { id })).toMatchObject({ state: 'running', exit_code: null });
    expect(await admin.browsers.process.stdin(processId, { id, data_b64: Buffer.from('via sdk\n').toString('base64') })).toEqual({ written_bytes: 8 });
    const stream = await admin.browsers.process.stdoutStream(processId, { id });
    let output = '';
    let exit: number | undefined;
    let killed = false;
    for await (const frame of stream) {
      if (frame.data_b64) output += text(frame.data_b64);
      if (output.includes('via sdk') && !killed) {
        killed = true;
        expect(await admin.browsers.process.kill(processId, { id, signal: 'TERM' })).toEqual({ ok: true });
      }
      if (frame.event === 'exit') exit = frame.exit_code;
    }
    expect(output).toBe('via sdk\n');
    expect(exit).toBe(143);
    expect(await admin.browsers.process.status(processId, { id })).toMatchObject({ state: 'exited', exit_code: 143 });
  });

  it('resizes a terminal', async () => {
    const { process_id: processId } = await admin.browsers.process.spawn(id, { command: 'sh', args: ['-c', 'read line; stty size'], allocate_tty: true, cols: 90, rows: 20 });
    expect(await admin.browsers.process.resize(processId!, { id, cols: 132, rows: 43 })).toEqual({ ok: true });
    await admin.browsers.process.stdin(processId!, { id, data_b64: Buffer.from('\r').toString('base64') });
    let output = '';
    for await (const frame of await admin.browsers.process.stdoutStream(processId!, { id })) if (frame.data_b64) output += text(frame.data_b64);
    expect(output).toContain('43 132');
  });

  it('answers bad input with the SDK\'s errors', async () => {
    await rejection(admin.browsers.process.exec(id, { command: 'id', as_root: true }), BadRequestError);
    await rejection(admin.browsers.process.status('00000000-0000-4000-8000-000000000000', { id }), NotFoundError);
    await rejection(admin.browsers.process.exec('no-such-session', { command: 'id' }), NotFoundError);
    const { process_id: processId } = await admin.browsers.process.spawn(id, { command: 'sleep', args: ['100'] });
    await rejection(admin.browsers.process.resize(processId!, { id, cols: 80, rows: 24 }), ConflictError);
    await admin.browsers.process.kill(processId!, { id, signal: 'KILL' });
  });
});
