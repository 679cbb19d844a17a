import type { Readable } from 'node:stream';

/** The first `limit` bytes of a stream; what comes after is counted and said, not kept. */
export class CappedOutput {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private dropped = 0;

  constructor(
    private readonly name: string,
    private readonly limit: number,
  ) {}

  follow(stream: Readable | null): void {
    stream?.on('data', (chunk: Buffer) => this.add(chunk));
    // The runner's end of the pipe closing early (it died) is the exit's story, not this one's.
    stream?.on('error', () => undefined);
  }

  add(chunk: Buffer): void {
    const room = this.limit - this.kept;
    if (room > 0) {
      const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
      this.chunks.push(part);
      this.kept += part.length;
    }
    this.dropped += Math.max(0, chunk.length - Math.max(0, room));
  }

  text(): string {
    const kept = Buffer.concat(this.chunks).toString('utf8');
    return this.dropped === 0 ? kept : `${kept}\n[${this.name} truncated: ${this.dropped} more bytes after the first ${this.limit} were dropped]\n`;
  }
}

/**
 * Newline-separated JSON messages from a stream, each handed to `onMessage`; more than
 * `limit` bytes without a newline calls `onOverflow` once and reads nothing more.
 */
export function readLines(stream: Readable, limit: number, onMessage: (message: unknown) => void, onOverflow: () => void): void {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let overflowed = false;
  stream.on('error', () => undefined);
  stream.on('data', (chunk: Buffer) => {
    if (overflowed) return;
    let start = 0;
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, start)) {
      if (pendingBytes + newline - start > limit) break;
      pending.push(chunk.subarray(start, newline));
      const line = Buffer.concat(pending).toString('utf8');
      pending = [];
      pendingBytes = 0;
      start = newline + 1;
      try {
        onMessage(JSON.parse(line));
      } catch {
        // Not the runner's (the code wrote on fd 3): ignored.
      }
    }
    pending.push(chunk.subarray(start));
    pendingBytes += chunk.length - start;
    if (pendingBytes > limit) {
      overflowed = true;
      pending = [];
      onOverflow();
    }
  });
}
