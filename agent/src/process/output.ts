/**
 * A spawned process's output, in order, for its SSE stream: the latest `limit` bytes are
 * kept (older chunks are dropped whole), so a subscriber that comes late gets what is
 * still kept, then the rest as it comes, then the exit.
 */

export type StreamName = 'stdout' | 'stderr';

export type OutputFrame = { stream: StreamName; data_b64: string } | { event: 'exit'; exit_code: number };

export interface OutputChunk {
  stream: StreamName;
  data: Buffer;
}

type Listener = (frame: OutputFrame) => void;

export class OutputLog {
  private chunks: OutputChunk[] = [];
  private bytes = 0;
  private exitCode: number | undefined;
  private readonly listeners = new Set<Listener>();
  /** Bytes dropped from the front since the start. */
  dropped = 0;

  constructor(private readonly limit: number) {}

  push(stream: StreamName, data: Buffer): void {
    if (data.length === 0 || this.exitCode !== undefined) return;
    this.chunks.push({ stream, data });
    this.bytes += data.length;
    while (this.bytes > this.limit && this.chunks.length > 1) {
      const first = this.chunks.shift()!;
      this.bytes -= first.data.length;
      this.dropped += first.data.length;
    }
    const frame: OutputFrame = { stream, data_b64: data.toString('base64') };
    for (const listener of this.listeners) listener(frame);
  }

  end(exitCode: number): void {
    if (this.exitCode !== undefined) return;
    this.exitCode = exitCode;
    for (const listener of this.listeners) listener({ event: 'exit', exit_code: exitCode });
    this.listeners.clear();
  }

  /** What is kept, then live frames until the exit frame; returns the unsubscribe. */
  subscribe(listener: Listener): () => void {
    for (const chunk of this.chunks) listener({ stream: chunk.stream, data_b64: chunk.data.toString('base64') });
    if (this.exitCode !== undefined) {
      listener({ event: 'exit', exit_code: this.exitCode });
      return () => undefined;
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Forgets the kept output (a pool reset: the next holder must not read it). */
  clear(): void {
    this.chunks = [];
    this.bytes = 0;
  }
}

/** Exec's capture: the first `limit` bytes of one stream, and whether more came. */
export class CappedBuffer {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;

  constructor(private readonly limit: number) {}

  push(data: Buffer): void {
    const room = this.limit - this.size;
    if (data.length > room) this.truncated = true;
    if (room <= 0) return;
    const kept = data.length > room ? data.subarray(0, room) : data;
    this.chunks.push(kept);
    this.size += kept.length;
  }

  base64(): string {
    return Buffer.concat(this.chunks).toString('base64');
  }
}
