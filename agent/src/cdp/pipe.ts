import type { Readable, Writable } from 'node:stream';

/**
 * Chromium's --remote-debugging-pipe: it reads commands on its fd 3 and writes answers
 * and events on its fd 4, each message JSON text ended by a NUL byte. No TCP port, no
 * HTTP endpoint: only the process holding the other ends (the agent) can speak CDP, and
 * Chromium exits when they close (the agent died).
 */
export class CdpPipe {
  private onMessage: (text: string) => void = () => undefined;
  private readonly closeHandlers: (() => void)[] = [];
  private pending: Buffer[] = [];
  private closed = false;

  constructor(
    private readonly toChromium: Writable,
    fromChromium: Readable,
  ) {
    fromChromium.on('data', (chunk: Buffer) => this.read(chunk));
    const end = () => this.markClosed();
    fromChromium.once('end', end);
    fromChromium.once('close', end);
    // EPIPE and the like arrive as errors once Chromium is gone; the close follows.
    fromChromium.on('error', end);
    toChromium.on('error', end);
  }

  setOnMessage(handler: (text: string) => void): void {
    this.onMessage = handler;
  }

  /** Called once, when Chromium's end of the pipe is gone (or close() was called). */
  onClose(handler: () => void): void {
    if (this.closed) queueMicrotask(handler);
    else this.closeHandlers.push(handler);
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** Dropped once the pipe is closed: nobody is left to answer. */
  send(text: string): void {
    if (this.closed) return;
    this.toChromium.write(text);
    this.toChromium.write('\0');
  }

  close(): void {
    this.toChromium.end();
    this.markClosed();
  }

  private read(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(0, start); end !== -1; end = chunk.indexOf(0, start)) {
      const piece = chunk.subarray(start, end);
      const whole = this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]);
      this.pending = [];
      start = end + 1;
      this.onMessage(whole.toString('utf8'));
    }
    if (start < chunk.length) this.pending.push(chunk.subarray(start));
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    for (const handler of this.closeHandlers.splice(0)) handler();
  }
}
