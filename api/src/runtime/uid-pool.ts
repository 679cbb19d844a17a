import { mkdirSync, openSync, closeSync, readFileSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import type { Logger } from 'pino';
import { isProcessAlive, processesOfUids } from '../../../lib/process-group.js';

/**
 * The uids embedded browsers run as: each session's Chromium (and its Xvfb and x11vnc)
 * runs as a uid of its own, which no other session has at the same time, so one
 * session's page cannot read another's files (work dirs are 0700) or signal its
 * processes. The uids need no /etc/passwd entry; the gid is the same number.
 *
 * A uid is taken at launch, recorded in the browser's record before any agent runs for
 * it (so a restarted service re-reserves it, see reserve), and given back only once the
 * browser's work dir is removed and no process of that uid is left (release kills any
 * stragglers). A uid with a live process is never handed out, even if not reserved here
 * (a leftover, or another service on the host using an overlapping range).
 *
 * Services on one host (a second `make run`, test apps in parallel workers) share the
 * uid range by default, and a service kills whatever runs as a uid it gives back: so each
 * held uid also has a lock file naming the holding process (`<lockDir>/<uid>`, created
 * exclusively). Another process's lock is respected while that process lives; a dead
 * one's is taken over. Without it two services could pick the same uid in the moment
 * between the process scan and the browser's start, and one would later kill the other's
 * browser.
 */

export interface UidRange {
  /** BROWSERPLANE_SESSION_UID_BASE */
  base: number;
  /** BROWSERPLANE_SESSION_UID_COUNT: at most this many embedded browsers at once. */
  count: number;
}

/**
 * Far above the uids of system and regular users and outside the 65,536 uids of the first
 * subordinate ranges useradd hands out (100000 upward); check it against /etc/subuid on a
 * host with many users of rootless containers.
 */
export const DEFAULT_SESSION_UIDS: UidRange = { base: 1_200_000, count: 1000 };

export class UidPoolExhaustedError extends Error {}

/** Where uid locks live: /run is root's and emptied at boot, like the processes it names. */
export const DEFAULT_UID_LOCK_DIR = '/run/browserplane/session-uids';

const RELEASE_WAIT_MS = 5000;

export class UidPool {
  /** uid -> the browser id holding it. */
  private readonly holders = new Map<number, string>();
  /** A scan of the range's processes made ahead of the next allocate (see prepare). */
  private scanned: Promise<Map<number, number[]> | undefined> | undefined;

  constructor(
    readonly range: UidRange,
    private readonly log: Logger,
    private readonly lockDir = DEFAULT_UID_LOCK_DIR,
  ) {
    mkdirSync(lockDir, { recursive: true, mode: 0o700 });
    if (!Number.isInteger(range.base) || !Number.isInteger(range.count) || range.base < 1000 || range.count < 1 || range.base + range.count > 2 ** 31 - 1) {
      throw new Error(`invalid session uid range ${range.base} + ${range.count}: the uids must lie in 1000..${2 ** 31 - 2}`);
    }
  }

  /** A uid recorded for `browserId` (adoption after a restart): held until released. */
  reserve(uid: number, browserId: string): void {
    const holder = this.holders.get(uid);
    if (holder !== undefined && holder !== browserId) this.log.error({ uid, browser_id: browserId, holder }, 'two browser records name the same session uid');
    this.holders.set(uid, holder ?? browserId);
    // Ours now (the service that recorded it is gone), whatever an old lock says.
    writeFileSync(this.lockFile(uid), `${process.pid}\n`, { mode: 0o600 });
  }

  holderOf(uid: number): string | undefined {
    return this.holders.get(uid);
  }

  /**
   * Scans the range's processes now, off any launch's path, for the next allocate: the scan
   * reads every process's status, 20-250 ms on a host with a few hundred processes, and was
   * a large part of a create. A scan made earlier is as good as one made at allocate: no
   * process starts as a session uid but for its holder, who holds its lock file, which
   * allocate takes anyway; a lock taken over from a process that is gone (whose browser may
   * have outlived it) is checked against a fresh scan.
   */
  prepare(): void {
    this.scanned ??= processesOfUids(this.range.base, this.range.count).catch(() => undefined);
  }

  /** The lowest uid that is neither held nor running any process. */
  async allocate(browserId: string): Promise<number> {
    const prepared = this.scanned;
    this.scanned = undefined;
    const early = await prepared;
    const busy = early ?? (await processesOfUids(this.range.base, this.range.count));
    // No await from here on: concurrent allocations see each other's picks.
    for (let uid = this.range.base; uid < this.range.base + this.range.count; uid++) {
      if (this.holders.has(uid) || busy.has(uid)) continue;
      const lock = this.lock(uid);
      if (!lock) continue;
      this.holders.set(uid, browserId);
      if (lock === 'taken_over' && early) return this.confirmTakenOver(uid, browserId);
      return uid;
    }
    throw new UidPoolExhaustedError(
      `no free session uid: all ${this.range.count} uids from ${this.range.base} (BROWSERPLANE_SESSION_UID_BASE, BROWSERPLANE_SESSION_UID_COUNT) ` +
        `are held by browsers or have processes (${this.holders.size} held)`,
    );
  }

  /**
   * Gives `uid` back once `browserId`'s files are gone: kills whatever still runs as it and
   * keeps it held (logged) if anything survives. A no-op unless `browserId` holds it.
   */
  async release(uid: number, browserId: string): Promise<void> {
    if (this.holders.get(uid) !== browserId) return;
    const deadline = Date.now() + RELEASE_WAIT_MS;
    for (;;) {
      const left = (await processesOfUids(uid, 1)).get(uid) ?? [];
      if (left.length === 0) break;
      if (Date.now() >= deadline) {
        this.log.error({ uid, browser_id: browserId, pids: left }, 'processes of a session uid survived SIGKILL: the uid stays held');
        return;
      }
      this.log.warn({ uid, browser_id: browserId, pids: left }, 'killing processes left over by a session uid');
      for (const pid of left) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone meanwhile.
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (this.holders.get(uid) === browserId) {
      this.holders.delete(uid);
      // A scan made while the browser ran still names the uid: it is free now.
      const scanned = this.scanned;
      if (scanned) this.scanned = scanned.then((busy) => (busy?.delete(uid), busy));
      try {
        unlinkSync(this.lockFile(uid));
      } catch {
        // Already gone.
      }
    }
  }

  /**
   * A uid whose lock was left by a process that is gone, picked from an earlier scan: its
   * browser may have started after that scan. If it runs, the uid stays locked by this
   * process and unheld (never handed out until a restart) and another is picked from a
   * fresh scan.
   */
  private async confirmTakenOver(uid: number, browserId: string): Promise<number> {
    const left = (await processesOfUids(uid, 1)).get(uid) ?? [];
    if (left.length === 0) return uid;
    this.log.warn({ uid, pids: left }, 'a session uid taken over from a process that is gone still runs processes: not used');
    this.holders.delete(uid);
    return this.allocate(browserId);
  }

  private lockFile(uid: number): string {
    return `${this.lockDir}/${uid}`;
  }

  /** Takes the uid's lock file: free, or left by a process that is gone. Synchronous, so allocate stays atomic in this process. */
  private lock(uid: number): 'free' | 'taken_over' | false {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(this.lockFile(uid), 'wx', 0o600);
        writeSync(fd, `${process.pid}\n`);
        closeSync(fd);
        return attempt === 0 ? 'free' : 'taken_over';
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      let owner: number;
      try {
        owner = Number(readFileSync(this.lockFile(uid), 'utf8').trim());
      } catch {
        continue; // Removed meanwhile: try again.
      }
      // Another pool of this process, or another live process: theirs.
      if (Number.isInteger(owner) && owner > 0 && isProcessAlive(owner)) return false;
      this.log.info({ uid, owner: Number.isNaN(owner) ? null : owner }, 'taking over the lock of a session uid from a process that is gone');
      try {
        unlinkSync(this.lockFile(uid));
      } catch {
        // Another process took it over first; the exclusive create decides.
      }
    }
    return false;
  }
}
