import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * What the local runtime remembers of each browser it placed, one JSON file per browser
 * in the state dir, so a restarted service can find agents that still run (and clean up
 * after those that do not).
 */
export interface BrowserRecord {
  browserId: string;
  agentPid: number;
  agentUrl: string;
  /** The agent's entry script: a recorded pid is only ours if its command line names it. */
  agentEntry: string;
  /** Chromium's main pid and process group, once the agent reported it. */
  browserPid?: number;
  workDir: string;
  /** The session uid its Chromium runs as (uid-pool.ts); absent when the service is not root. */
  chromiumUid?: number;
  logFile: string;
  labels: Record<string, string>;
  startedAt: string;
}

const BROWSER_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Browser ids become file and directory names; anything else is refused before it reaches a path. */
export function assertSafeBrowserId(browserId: string): void {
  if (!BROWSER_ID.test(browserId)) throw new Error(`invalid browser id ${JSON.stringify(browserId)}: expected [A-Za-z0-9_-]{1,128}`);
}

export class BrowserRecords {
  constructor(readonly stateDir: string) {}

  recordFile(browserId: string): string {
    return path.join(this.stateDir, `${browserId}.json`);
  }

  logFile(browserId: string): string {
    return path.join(this.stateDir, `${browserId}.log`);
  }

  async ensureDir(): Promise<void> {
    await mkdir(this.stateDir, { recursive: true, mode: 0o700 });
  }

  /** Written to a temp file and renamed, so a crash never leaves half a record. */
  async write(record: BrowserRecord): Promise<void> {
    const file = this.recordFile(record.browserId);
    await writeFile(`${file}.tmp`, JSON.stringify(record, null, 2), { mode: 0o600 });
    await rename(`${file}.tmp`, file);
  }

  async read(browserId: string): Promise<BrowserRecord | undefined> {
    try {
      return JSON.parse(await readFile(this.recordFile(browserId), 'utf8')) as BrowserRecord;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async ids(): Promise<string[]> {
    const names = await readdir(this.stateDir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [] as string[];
      throw error;
    });
    return names
      .filter((name) => name.endsWith('.json'))
      .map((name) => name.slice(0, -'.json'.length))
      .filter((id) => BROWSER_ID.test(id));
  }

  /** Where the browser's agent reports the port it chose. */
  portFile(browserId: string): string {
    return path.join(this.stateDir, `${browserId}.port`);
  }

  async remove(browserId: string): Promise<void> {
    await rm(this.recordFile(browserId), { force: true });
    await rm(this.logFile(browserId), { force: true });
    await rm(this.portFile(browserId), { force: true });
  }
}
