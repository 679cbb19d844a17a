import { open, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError, PermissionDeniedError } from '@onkernel/sdk';
import type { AuditLogEntry } from '@onkernel/sdk/resources/audit-logs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';
import { rejection, unique } from './support/sdk.js';

let service: RunningService;
let kernel: Kernel;
const window = () => ({ start: new Date(Date.now() - 3_600_000).toISOString(), end: new Date(Date.now() + 3_600_000).toISOString() });

beforeAll(async () => {
  service = await startService();
  kernel = service.client();
});
afterAll(async () => {
  await cleanupServices();
});

/** The window's entries once `count` of them are written (writes are batched every 250 ms). */
const entriesOnceWritten = (client: Kernel, count: number, query: Record<string, unknown> = {}) =>
  eventually(async () => collect(client.auditLogs.list({ ...window(), ...query })), {
    accept: (entries: AuditLogEntry[]) => entries.length >= count,
    timeoutMs: 10_000,
    intervalMs: 100,
    what: `${count} audit log entries`,
  });

describe('audit logs through the SDK', () => {
  it('lists the calls of the org newest first, page by page, with the SDK\'s filters', async () => {
    const name = unique('audited');
    const proxies = [];
    for (let i = 0; i < 3; i++) proxies.push(await kernel.proxies.create({ type: 'custom', name: `${name}-${i}`, config: { host: 'proxy.test', port: 3128 } }));
    await kernel.proxies.delete(proxies[0]!.id!);
    await rejection(kernel.proxies.delete('proxy_nothere'), NotFoundError);

    const entries = await entriesOnceWritten(kernel, 5, { limit: 2 });
    const calls = entries.map((e) => `${e.method} ${e.route} ${e.status}`);
    expect(calls.slice(0, 5)).toEqual(['DELETE /proxies/{id} 404', 'DELETE /proxies/{id} 204', 'POST /proxies 200', 'POST /proxies 200', 'POST /proxies 200']);
    expect(entries[1]).toMatchObject({ path: `/proxies/${proxies[0]!.id}`, auth_strategy: 'api_key', email: '', user_agent: expect.stringContaining('Kernel/JS') });
    const times = entries.map((e) => Date.parse(e.timestamp));
    expect([...times].sort((a, b) => b - a)).toEqual(times);

    expect((await collect(kernel.auditLogs.list({ ...window(), method: 'DELETE' }))).map((e) => e.status)).toEqual([404, 204]);
    expect((await collect(kernel.auditLogs.list({ ...window(), exclude_method: ['POST', 'PATCH'] }))).map((e) => e.method)).toEqual(['DELETE', 'DELETE']);
    expect(await collect(kernel.auditLogs.list({ ...window(), search: 'proxy_nothere' }))).toHaveLength(1);
  });

  it('downloads the whole window with the SDK\'s helper, which checks every chunk\'s checksum and cursor', async () => {
    const listed = await entriesOnceWritten(kernel, 5);
    const file = path.join(os.tmpdir(), `${unique('audit')}.jsonl.gz`);
    const handle = await open(file, 'w');
    try {
      const progress: number[] = [];
      const result = await kernel.auditLogs.download({ ...window(), limit: 2 }, handle, { onProgress: (p) => void progress.push(p.chunkRows) });
      expect(result.rows).toBe(listed.length);
      expect(result.chunks).toBe(Math.ceil(listed.length / 2));
      expect(progress.reduce((a, b) => a + b, 0)).toBe(listed.length);
      await handle.close();
      const lines = gunzipSync(await readFile(file)).toString().trimEnd().split('\n');
      expect(lines.map((l) => JSON.parse(l) as AuditLogEntry)).toEqual(listed);
    } finally {
      await rm(file, { force: true });
    }
  });

  it('hands out one plain jsonl chunk through exportChunk', async () => {
    const res = await kernel.auditLogs.exportChunk({ ...window(), format: 'jsonl', limit: 1 });
    expect(res.headers.get('x-has-more')).toBe('true');
    expect(res.headers.get('x-row-count')).toBe('1');
    const text = await res.text();
    expect((JSON.parse(text) as AuditLogEntry).route).toMatch(/^\//);
  });

  it('refuses a window that ends before it starts, and project-scoped keys', async () => {
    const { start, end } = window();
    await rejection(collect(kernel.auditLogs.list({ start: end, end: start })), BadRequestError);
    const project = await kernel.projects.create({ name: unique('audit-project') });
    const key = await kernel.apiKeys.create({ name: unique('scoped'), project_id: project.id });
    await rejection(collect(service.client(key.key).auditLogs.list(window())), PermissionDeniedError);
  });

  // The writer's own test (integration) shows close() writes a queue that waits a minute; this one shows the service calls it.
  it('keeps the last calls before a stop: they are listed after a restart', async () => {
    const name = unique('last-call');
    const last = await kernel.proxies.create({ type: 'custom', name, config: { host: 'proxy.test', port: 3128 } });
    const stopped = await service.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    service = await startService({ dataDir: service.dataDir });
    kernel = service.client();
    const found = await collect(kernel.auditLogs.list({ ...window(), search: '/proxies' }));
    expect(found.some((e) => e.method === 'POST' && e.route === '/proxies' && JSON.stringify(e).includes(last.id!))).toBe(true);
  });
});
