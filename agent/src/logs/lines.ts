import { LINE_CUT_MARK } from './limits.js';

/**
 * Bytes in, lines out, as `tail` reads them: split at "\n" (a "\r" before it is dropped),
 * decoded as UTF-8 once whole, empty lines skipped (as Kernel's stream skips them). A line
 * longer than `maxBytes` keeps its first `maxBytes` bytes and ends with LINE_CUT_MARK;
 * the rest, up to its newline, is dropped, so memory per stream stays bounded whatever a
 * process writes.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private cut = false;

  constructor(
    private readonly maxBytes: number,
    private readonly emit: (line: string) => void,
  ) {}

  push(chunk: Buffer | string): void {
    const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    let start = 0;
    for (;;) {
      const newline = data.indexOf(10, start);
      this.take(data.subarray(start, newline < 0 ? data.length : newline));
      if (newline < 0) return;
      this.endLine();
      start = newline + 1;
    }
  }

  /** Sends what is held as a last line (a file's end without a newline, a process gone). */
  flush(): void {
    if (this.size > 0 || this.cut) this.endLine();
  }

  /** Forgets what is held (a truncated file starts over). */
  discard(): void {
    this.parts = [];
    this.size = 0;
    this.cut = false;
  }

  /** Bytes held of a line not ended yet. */
  get pending(): number {
    return this.size;
  }

  private take(part: Buffer): void {
    if (this.cut || part.length === 0) return;
    const room = this.maxBytes - this.size;
    if (part.length > room) {
      this.cut = true;
      part = part.subarray(0, room);
    }
    // Copied: a caller's read buffer is reused for the next read.
    this.parts.push(Buffer.from(part));
    this.size += part.length;
  }

  private endLine(): void {
    let line = Buffer.concat(this.parts, this.size).toString('utf8');
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (this.cut) line += LINE_CUT_MARK;
    this.discard();
    if (line !== '') this.emit(line);
  }
}
