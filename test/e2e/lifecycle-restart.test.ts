import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { NotFoundError } from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { rejection, unique } from './support/sdk.js';
import { cleanupServices, startService } from '../support/service.js';

/**
 * Sessions outlive a killed service: kill -9 leaves the agents running (each in its own
 * process group), and the next start on the same data dir re-adopts the browsers that
 * still run and ends the sessions whose browser died meanwhile. A clean stop, by contrast,
 * leaves no browser (lifecycle-shutdown and the browsers tests check that).
 */

interface AgentRecord {
  browserId: string;
  agentPid: number;
  browserPid?: number;
  workDir: string;
}

let pages: TestPageServer;
const leftovers: number[] = [];

beforeAll(async () => {
  pages = await startTestPageServer({ '/marker': '<title>before the restart</title>' });
});
afterEach(async () => {
  await cleanupServices();
  // Only when the test failed half-way: agents of a service that never came back.
  for (const pid of leftovers.splice(0)) killGroup(pid, 'SIGKILL');
});
afterAll(async () => {
  await pages?.close();
});

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The local runtime's records of the agents it placed (state dir <data>/browsers). */
async function agentRecords(dataDir: string): Promise<Map<string, AgentRecord>> {
  const dir = path.join(dataDir, 'browsers');
  const records = new Map<string, AgentRecord>();
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.json'))) {
    const record = JSON.parse(await readFile(path.join(dir, file), 'utf8')) as AgentRecord;
    records.set(record.browserId, record);
  }
  return records;
}

describe('a service killed with SIGKILL and started again', () => {
  it('re-adopts the browsers that still run and ends the sessions whose browser died', async () => {
    const first = await startService();
    const admin = first.client();
    const kept = await admin.browsers.create({ name: unique('kept'), headless: true, timeout_seconds: 600 });
    const lost = await admin.browsers.create({ name: unique('lost'), headless: true, timeout_seconds: 600 });

    const before = await chromium.connectOverCDP(kept.cdp_ws_url);
    const page = await before.contexts()[0]!.newPage();
    await page.goto(`${pages.url}/marker`);
    await before.close();

    const records = await agentRecords(first.dataDir);
    const keptAgent = records.get(kept.session_id)!;
    const lostAgent = records.get(lost.session_id)!;
    leftovers.push(keptAgent.agentPid, lostAgent.agentPid, ...[keptAgent.browserPid, lostAgent.browserPid].filter((p): p is number => p !== undefined));

    expect(await first.kill()).toEqual({ code: null, signal: 'SIGKILL' });
    expect(alive(keptAgent.agentPid), 'agents outlive a killed service').toBe(true);
    // The second browser dies while no service runs: its agent and Chromium both go.
    killGroup(lostAgent.agentPid, 'SIGKILL');
    if (lostAgent.browserPid) killGroup(lostAgent.browserPid, 'SIGKILL');

    const second = await startService({ dataDir: first.dataDir });
    const again = second.client(first.adminKey);
    const report = second.logs().find((line) => line.msg === 'browser sessions reconciled at start-up');
    expect(report).toMatchObject({ adopted: 1, ended: 1, orphans: 0 });

    // The kept session is the same browser: the page opened before the kill is still there.
    const adopted = await again.browsers.retrieve(kept.session_id);
    expect(adopted.cdp_ws_url).not.toBe(kept.cdp_ws_url); // a new service address and token
    const after = await chromium.connectOverCDP(adopted.cdp_ws_url);
    try {
      const titles = await Promise.all(after.contexts()[0]!.pages().map((p) => p.title()));
      expect(titles).toContain('before the restart');
    } finally {
      await after.close();
    }

    await rejection(again.browsers.retrieve(lost.session_id), NotFoundError);
    const ended = await again.browsers.retrieve(lost.session_id, { include_deleted: true });
    expect(ended.deleted_at).toEqual(expect.any(String));
    expect((await agentRecords(first.dataDir)).has(lost.session_id), 'the dead browser’s record is removed').toBe(false);

    // A clean stop of the new service terminates the adopted browser too.
    expect(await second.stop('SIGTERM')).toEqual({ code: 0, signal: null });
    await expect.poll(() => alive(keptAgent.agentPid), { timeout: 15_000 }).toBe(false);
    expect(await agentRecords(first.dataDir)).toEqual(new Map());
  });
});
