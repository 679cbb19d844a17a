import { link, symlink, writeFile as writeHostFile } from 'node:fs/promises';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { newFsSession, writeFile, type FsSession } from './browser-fs.fixtures.js';
import { ProcessCalls } from './browser-process.fixtures.js';
import { frameMatching, openLogs, readLogs, refusal } from './browser-logs.fixtures.js';

/**
 * browsers.logs.stream against one real headless session (real agent, Chromium,
 * Postgres): a file of the browser's filesystem read and followed as tail -F, the
 * session's own processes' output, every refusal, and another project's key. Nothing is
 * faked.
 */

let app: TestApp;
let client: HttpClient;
let fs: FsSession;
let proc: ProcessCalls;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  ({ http: client } = await newProject(app.tenant.http));
  fs = await newFsSession(app, client);
  proc = new ProcessCalls(client, fs.id);
}, 120_000);
afterAll(async () => {
  await app?.close();
});

const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}`);

describe('source=path', () => {
  it('sends the lines of a file and ends without follow', async () => {
    expect((await writeFile(fs, '/app.log', 'first\nsecond\r\n\nthird')).status).toBe(204);
    expect(await readLogs(client, fs.id, { source: 'path', path: '/app.log' })).toEqual(['first', 'second', 'third']);
  });

  it('sends only the last 1000 lines of a long file, each whole', async () => {
    await writeFile(fs, '/long.log', lines(1, 1500).join('\n') + '\n');
    expect(await readLogs(client, fs.id, { source: 'path', path: '/long.log' })).toEqual(lines(501, 1500));
  });

  it('cuts a line longer than 16 KiB and says so', async () => {
    await writeFile(fs, '/wide.log', `${'x'.repeat(20_000)}\nafter\n`);
    const [wide, after] = await readLogs(client, fs.id, { source: 'path', path: '/wide.log' });
    expect(wide).toBe(`${'x'.repeat(16 * 1024)} …[line cut]`);
    expect(after).toBe('after');
  });

  it('follows appended lines, a truncation and a rotation, as tail -F', async () => {
    await writeFile(fs, '/follow.log', 'before\n');
    const sse = await openLogs(client, fs.id, { source: 'path', path: '/follow.log', follow: 'true' });
    expect(sse.res.headers.get('content-type')).toContain('text/event-stream');
    try {
      expect((await sse.frame(1)).data).toMatchObject({ event: 'log', message: 'before' });
      await proc.sh('echo appended >> /follow.log');
      expect((await sse.frame(2)).data.message).toBe('appended');
      await proc.sh(': > /follow.log; echo after-truncation >> /follow.log');
      expect((await sse.frame(3)).data.message).toBe('after-truncation');
      await proc.sh('echo last-of-old >> /follow.log; mv /follow.log /follow.log.1; echo in-new-file > /follow.log');
      expect((await sse.frame(4)).data.message).toBe('last-of-old');
      expect((await sse.frame(5)).data.message).toBe('in-new-file');
      expect(Date.parse((await sse.frame(5)).data.timestamp)).not.toBeNaN();
    } finally {
      sse.abort();
    }
  });

  it('holds a last line without a newline until it is ended when following', async () => {
    await writeFile(fs, '/partial.log', 'whole\nhalf');
    const sse = await openLogs(client, fs.id, { source: 'path', path: '/partial.log' });
    try {
      expect((await sse.frame(1)).data.message).toBe('whole');
      await proc.sh("printf ' and the rest\\n' >> /partial.log");
      expect((await sse.frame(2)).data.message).toBe('half and the rest');
    } finally {
      sse.abort();
    }
  });

  it('answers 404 for a missing file and 400 for a directory', async () => {
    const missing = await refusal(client, fs.id, { source: 'path', path: '/no-such.log' });
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 'not_found' });
    expect((await refusal(client, fs.id, { source: 'path', path: '/Downloads' })).status).toBe(400);
  });

  it('refuses paths out of the browser filesystem: .., a symlink out, a hard link', async () => {
    const climb = await refusal(client, fs.id, { source: 'path', path: '/../../../../etc/passwd' });
    expect(climb.status).toBe(400);
    expect(climb.body).toMatchObject({ code: 'invalid_path' });
    await symlink('/etc/hostname', path.join(fs.hostRoot, 'hostname-link'));
    const linkedOut = await refusal(client, fs.id, { source: 'path', path: '/hostname-link' });
    expect(linkedOut.status).toBe(400);
    expect(linkedOut.body).toMatchObject({ code: 'invalid_path' });
    await writeHostFile(path.join(fs.hostRoot, 'inside.log'), 'x\n');
    await link(path.join(fs.hostRoot, 'inside.log'), path.join(fs.hostRoot, 'hard.log'));
    expect((await refusal(client, fs.id, { source: 'path', path: '/hard.log' })).status).toBe(400);
  });

  it("reads /proc/self/environ as a file of the browser's filesystem (absent), never the agent's", async () => {
    const res = await refusal(client, fs.id, { source: 'path', path: '/proc/self/environ' });
    expect(res.status).toBe(404);
    expect(res.text).not.toContain('AGENT');
  });
});

describe('source=supervisor', () => {
  it("sends the agent's own log lines, named by Kernel's name too", async () => {
    const agent = await readLogs(client, fs.id, { source: 'supervisor', supervisor_process: 'agent' });
    expect(agent.some((line) => JSON.parse(line).msg === 'browser ready')).toBe(true);
    const kernelName = await readLogs(client, fs.id, { source: 'supervisor', supervisor_process: 'kernel-images-api' });
    expect(kernelName.some((line) => line.includes('browser ready'))).toBe(true);
  });

  it("sends Chromium's own output, after the agent's line on its start", async () => {
    const lines = await readLogs(client, fs.id, { source: 'supervisor', supervisor_process: 'chromium' });
    expect(lines[0]).toMatch(/^spawned: 'chromium' with pid \d+$/);
    // Chromium's own line format: [pid:tid:MMDD/HHMMSS.micros:LEVEL:file(line)] (dbus complaints here, where there is no bus).
    expect(lines.some((line) => /^\[\d+:\d+:\d{4}\/\d{6}\.\d+:(ERROR|WARNING|INFO|VERBOSE\d?):/.test(line))).toBe(true);
  });

  it('sends every process, each line named, when no process is given', async () => {
    const sse = await openLogs(client, fs.id, { source: 'supervisor', follow: 'false' });
    await sse.ended;
    const processes = new Set(sse.payloads.map((frame) => frame.process));
    expect(processes).toContain('agent');
    expect(processes).toContain('chromium');
    for (const frame of sse.payloads) expect(frame.message.startsWith(`[${frame.process}] `)).toBe(true);
  });

  it('follows new lines: a CDP client connecting shows in the agent log', async () => {
    const sse = await openLogs(client, fs.id, { source: 'supervisor', supervisor_process: 'agent', follow: 'true' });
    try {
      const kept = (await readLogs(client, fs.id, { source: 'supervisor', supervisor_process: 'agent' })).length;
      await sse.frame(kept);
      const browser = await chromium.connectOverCDP(fs.cdpWsUrl);
      await browser.close();
      const n = await frameMatching(sse, (message) => message.includes('CDP client connected'));
      expect(n).toBeGreaterThan(kept);
      expect(sse.frames[n - 1]!.data.process).toBe('agent');
    } finally {
      sse.abort();
    }
  });
});

describe('source=supervisor on a headful browser', () => {
  it("sends the display's start; x11vnc has no line until a live view starts it", async () => {
    const res = await client.post('/browsers', { headless: false });
    expect(res.status).toBe(200);
    const headful = res.body.session_id as string;
    try {
      // Then whatever Xvfb says itself (often nothing; a display number it tried that was taken).
      const xvfb = await readLogs(client, headful, { source: 'supervisor', supervisor_process: 'xvfb' });
      expect(xvfb[0]).toMatch(/^spawned: 'xvfb' with pid \d+$/);
      expect(await readLogs(client, headful, { source: 'supervisor', supervisor_process: 'x11vnc' })).toEqual([]);
    } finally {
      await client.delete(`/browsers/${headful}`);
    }
  });
});

describe('refusals', () => {
  it.each([
    [{}, 'source'],
    [{ source: 'journal' }, 'source'],
    [{ source: 'path' }, 'path'],
    [{ source: 'path', path: 'relative.log' }, 'path'],
    [{ source: 'supervisor', path: '/app.log' }, 'path'],
    [{ source: 'path', path: '/app.log', supervisor_process: 'chromium' }, 'supervisor_process'],
    [{ source: 'supervisor', supervisor_process: 'sshd' }, 'supervisor_process'],
    [{ source: 'supervisor', follow: 'sometimes' }, 'follow'],
  ])('answers 400 for %j, naming %s', async (query, field) => {
    const res = await refusal(client, fs.id, query);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(JSON.stringify(res.body.details)).toContain(field);
  });

  it('lists the valid process names for an unknown one', async () => {
    const res = await refusal(client, fs.id, { source: 'supervisor', supervisor_process: 'sshd' });
    expect(JSON.stringify(res.body)).toContain('chromium, agent, xvfb, x11vnc');
  });

  it("answers 404 to another project's key, whatever the source", async () => {
    const { http: other } = await newProject(app.tenant.http);
    // A query refused on one's own browser (path missing) is still the 404 of a browser not seen.
    for (const query of [{ source: 'path', path: '/app.log' }, { source: 'supervisor' }, { source: 'path' }] as Record<string, string>[]) {
      const res = await refusal(other, fs.id, query);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
  });

  it('refuses a ninth stream at once with 409, and takes one again after a stream closed', async () => {
    const open = await Promise.all(Array.from({ length: 8 }, () => openLogs(client, fs.id, { source: 'supervisor', supervisor_process: 'xvfb' })));
    try {
      expect(open.map((sse) => sse.res.status)).toEqual(Array(8).fill(200));
      const ninth = await refusal(client, fs.id, { source: 'supervisor', follow: 'false' });
      expect(ninth.status).toBe(409);
      expect(ninth.body.code).toBe('log_stream_limit_reached');
      open.pop()!.abort();
      await expect
        .poll(async () => (await refusal(client, fs.id, { source: 'supervisor', supervisor_process: 'xvfb', follow: 'false' })).status, { timeout: 10_000 })
        .toBe(200);
    } finally {
      for (const sse of open) sse.abort();
    }
  });
});
