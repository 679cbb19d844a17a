import type { FileHandle } from 'node:fs/promises';
import { FsError } from '../fs/errors.js';
import type { SessionRoot } from '../fs/session-root.js';
import type { LogLimits } from './limits.js';
import { LineSplitter } from './lines.js';

/**
 * source=path: a file of the browser's filesystem read as `tail -n N -F` reads it. The
 * path is opened through the session root (fs/session-root.ts), as every fs route opens
 * it: no "..", no symlink or hard link out of the root, and "/" is the browser's own
 * filesystem, so /proc/self/environ is a file there (absent), not the agent's.
 *
 * First its last lines (limits.tailLines, looked for in its last limits.tailBytes); with
 * follow, then every line appended, by polling (POLL_MS): inotify would need the file's
 * directory watched to see rotations and adds nothing a quarter second's poll misses.
 * A file that shrinks, or whose last bytes read are no longer what they were (truncated
 * and written again between two polls), is read again from its start; a file replaced at
 * the path (rotated) is read to its end, then the new one from its start.
 */

const POLL_MS = 250;
/** Every this many polls the path is opened again to see whether another file took its place. */
const ROTATION_CHECK_POLLS = 4;
const READ_CHUNK = 64 * 1024;
/** Read per poll at most, so one fast-growing file does not hold the agent's event loop. */
const READ_PER_POLL = 4 * 1024 * 1024;
/** The bytes before the offset compared at each poll to notice a file rewritten from its start. */
const FINGERPRINT_BYTES = 64;

export interface FollowOptions {
  follow: boolean;
  limits: LogLimits;
  signal: AbortSignal;
  /** Sends one line; resolves once the client can take more (backpressure). */
  emit: (line: string) => Promise<void>;
}

/** Opens the file or throws the FsError the client gets (404 not_found, 400 invalid_path, ...) before any byte is sent. */
export async function openLogFile(root: SessionRoot, virtualPath: string): Promise<FileHandle> {
  const handle = await root.openExisting(virtualPath);
  if (!(await handle.stat()).isFile()) {
    await handle.close();
    throw new FsError(400, 'is_a_directory', `${virtualPath} is a directory, not a file`);
  }
  return handle;
}

export async function streamLogFile(root: SessionRoot, virtualPath: string, first: FileHandle, options: FollowOptions): Promise<void> {
  const follower = new Follower(root, virtualPath, first, options);
  try {
    await follower.sendTail();
    if (options.follow) await follower.follow();
  } finally {
    await follower.close();
  }
}

class Follower {
  private offset = 0;
  private fingerprint = Buffer.alloc(0);
  private readonly queue: string[] = [];
  private readonly splitter: LineSplitter;
  private readonly buffer = Buffer.allocUnsafe(READ_CHUNK);

  constructor(
    private readonly root: SessionRoot,
    private readonly virtualPath: string,
    private handle: FileHandle,
    private readonly options: FollowOptions,
  ) {
    this.splitter = new LineSplitter(options.limits.lineBytes, (line) => this.queue.push(line));
  }

  /** The file's last lines; without follow a last line with no newline is sent too. */
  async sendTail(): Promise<void> {
    const { tailBytes, tailLines } = this.options.limits;
    const size = (await this.handle.stat()).size;
    const start = Math.max(0, size - tailBytes);
    // Started mid-file: what comes before the first newline is part of an earlier line.
    this.offset = start;
    if (start > 0) await this.skipToNextLine(size);
    await this.readTo(size);
    if (!this.options.follow) this.splitter.flush();
    this.queue.splice(0, Math.max(0, this.queue.length - tailLines));
    await this.drain();
  }

  async follow(): Promise<void> {
    const { signal } = this.options;
    for (let poll = 1; !signal.aborted; poll++) {
      await sleep(POLL_MS, signal);
      if (signal.aborted) return;
      const size = (await this.handle.stat()).size;
      if (size < this.offset || (size > this.offset && !(await this.unchangedBeforeOffset()))) {
        this.startOver();
        this.splitter.discard();
      }
      await this.readTo(Math.min(size, this.offset + READ_PER_POLL));
      await this.drain();
      if (poll % ROTATION_CHECK_POLLS === 0) await this.switchIfRotated();
    }
  }

  private async unchangedBeforeOffset(): Promise<boolean> {
    const length = Math.min(FINGERPRINT_BYTES, this.offset);
    if (length === 0) return true;
    const now = Buffer.alloc(length);
    const { bytesRead } = await this.handle.read(now, 0, length, this.offset - length);
    return bytesRead === length && now.equals(this.fingerprint.subarray(this.fingerprint.length - length));
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }

  private async skipToNextLine(size: number): Promise<void> {
    while (this.offset < size) {
      const { bytesRead } = await this.handle.read(this.buffer, 0, Math.min(READ_CHUNK, size - this.offset), this.offset);
      if (bytesRead === 0) return;
      const newline = this.buffer.subarray(0, bytesRead).indexOf(10);
      const skipped = this.buffer.subarray(0, newline >= 0 ? newline + 1 : bytesRead);
      this.offset += skipped.length;
      this.remember(skipped);
      if (newline >= 0) return;
    }
  }

  private async readTo(end: number): Promise<void> {
    while (this.offset < end) {
      const { bytesRead } = await this.handle.read(this.buffer, 0, Math.min(READ_CHUNK, end - this.offset), this.offset);
      if (bytesRead === 0) return;
      this.offset += bytesRead;
      this.remember(this.buffer.subarray(0, bytesRead));
      this.splitter.push(this.buffer.subarray(0, bytesRead));
    }
  }

  private startOver(): void {
    this.offset = 0;
    this.fingerprint = Buffer.alloc(0);
  }

  /** Keeps the last FINGERPRINT_BYTES read (skipToNextLine's too: they lie before the offset). */
  private remember(read: Buffer): void {
    this.fingerprint = Buffer.concat([this.fingerprint, read.subarray(Math.max(0, read.length - FINGERPRINT_BYTES))]);
    if (this.fingerprint.length > FINGERPRINT_BYTES) this.fingerprint = this.fingerprint.subarray(this.fingerprint.length - FINGERPRINT_BYTES);
  }

  private async drain(): Promise<void> {
    for (const line of this.queue.splice(0)) await this.options.emit(line);
  }

  /**
   * Another file at the path (rotation): the old one is read to its end, then the new one
   * from its start. No file there (rotated away, not yet recreated) or one refused now
   * (a symlink out): the old one is kept and the path looked at again later, as tail -F.
   */
  private async switchIfRotated(): Promise<void> {
    const next = await openLogFile(this.root, this.virtualPath).catch(() => undefined);
    if (!next) return;
    const [now, then] = await Promise.all([next.stat(), this.handle.stat()]);
    if (now.ino === then.ino && now.dev === then.dev) {
      await next.close();
      return;
    }
    await this.readTo(then.size);
    this.splitter.flush();
    await this.drain();
    await this.handle.close();
    this.handle = next;
    this.startOver();
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
