import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../api/src/logger.js';

/** Every line an app logs, at the most verbose level, so a test can prove what never reaches the log. */
export class CapturedLog extends Writable {
  readonly lines: string[] = [];

  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    done();
  }

  /** A trace-level logger writing here, for startTestApp({ log }). */
  logger(): Logger {
    return createLogger('trace', this);
  }

  entries(): Array<Record<string, any>> {
    return this.lines.map((line) => JSON.parse(line) as Record<string, any>);
  }

  text(): string {
    return this.lines.join('\n');
  }
}
