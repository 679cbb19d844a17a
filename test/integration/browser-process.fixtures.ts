import type { HttpClient, HttpResponse } from '../support/http.js';
import { openSse, type SseStream } from '../support/sse.js';

/** Helpers for the process tests: calls on one session, and output decoded. */

export interface ExecResult {
  exit_code: number;
  duration_ms: number;
  stdout_b64: string;
  stderr_b64: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  timed_out: boolean;
}

export type StreamFrame = { stream?: 'stdout' | 'stderr'; data_b64?: string; event?: 'exit'; exit_code?: number };

export class ProcessCalls {
  constructor(
    readonly client: HttpClient,
    readonly sessionId: string,
  ) {}

  private path(suffix: string): string {
    return `/browsers/${this.sessionId}/process/${suffix}`;
  }

  exec(body: Record<string, unknown>): Promise<HttpResponse> {
    return this.client.post(this.path('exec'), body);
  }

  /** exec of `sh -c script`, expected to answer 200, with its output as text. */
  async sh(script: string, extra: Record<string, unknown> = {}): Promise<ExecResult & { stdout: string; stderr: string }> {
    const res = await this.exec({ command: 'sh', args: ['-c', script], ...extra });
    if (res.status !== 200) throw new Error(`exec failed: ${res.status} ${res.text}`);
    const body = res.body as ExecResult;
    return { ...body, stdout: text(body.stdout_b64), stderr: text(body.stderr_b64) };
  }

  spawn(body: Record<string, unknown>): Promise<HttpResponse> {
    return this.client.post(this.path('spawn'), body);
  }

  async spawnOk(body: Record<string, unknown>): Promise<string> {
    const res = await this.spawn(body);
    if (res.status !== 200) throw new Error(`spawn failed: ${res.status} ${res.text}`);
    return res.body.process_id as string;
  }

  status(id: string) {
    return this.client.get(this.path(`${id}/status`));
  }

  stdin(id: string, data: string) {
    return this.client.post(this.path(`${id}/stdin`), { data_b64: Buffer.from(data).toString('base64') });
  }

  kill(id: string, signal: string) {
    return this.client.post(this.path(`${id}/kill`), { signal });
  }

  resize(id: string, cols: number, rows: number) {
    return this.client.post(this.path(`${id}/resize`), { cols, rows });
  }

  stream(id: string): Promise<SseStream<StreamFrame>> {
    return openSse<StreamFrame>(this.client.baseUrl + this.path(`${id}/stdout/stream`), { key: this.client.key, headers: this.client.extraHeaders });
  }

  /** Reads the stream to its end: the output of both streams, and the exit code. */
  async outputOf(id: string): Promise<{ stdout: string; stderr: string; exitCode: number | undefined }> {
    const sse = await this.stream(id);
    await sse.ended;
    return collect(sse.payloads);
  }
}

export function collect(frames: StreamFrame[]): { stdout: string; stderr: string; exitCode: number | undefined } {
  const out = { stdout: '', stderr: '', exitCode: undefined as number | undefined };
  for (const frame of frames) {
    if (frame.event === 'exit') out.exitCode = frame.exit_code;
    else if (frame.stream) out[frame.stream] += text(frame.data_b64 ?? '');
  }
  return out;
}

export const text = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
