import { describe, expect, it } from 'vitest';
import { createLogShipper, LOG_BATCH_LINES, type LogLine } from '../../api/src/modules/apps/pod/log-shipper.js';
import { SubjectEndedError, type WireClient } from '../../api/src/modules/apps/pod/wire-client.js';

/** The pod's log shipper against an in-memory WireClient (the HTTP side is app-pod-job.test.ts's). */
function recordingClient(answer: (batch: number) => Error | undefined = () => undefined): { client: WireClient; batches: LogLine[][] } {
  const batches: LogLine[][] = [];
  const unused = () => Promise.reject(new Error('not used by the shipper'));
  const client: WireClient = {
    getJson: unused,
    download: unused,
    upload: unused,
    postJson: (path, body) => {
      expect(path).toBe('/internal/app-jobs/logs');
      const error = answer(batches.length);
      batches.push((body as { lines: LogLine[] }).lines);
      return error ? Promise.reject(error) : Promise.resolve();
    },
  };
  return { client, batches };
}

describe('pod log shipper', () => {
  it('ships every line in order, at most 500 a request, by the end of close()', async () => {
    const { client, batches } = recordingClient();
    const shipper = createLogShipper(client, { onEnded: () => undefined, intervalMs: 5 });
    for (let i = 0; i < 1201; i++) shipper.push(i % 2 ? 'stderr' : 'stdout', `line ${i}`);
    await shipper.close();
    expect(batches.every((batch) => batch.length <= LOG_BATCH_LINES)).toBe(true);
    const lines = batches.flat();
    expect(lines.map((line) => line.message)).toEqual(Array.from({ length: 1201 }, (_, i) => `line ${i}`));
    expect(lines[1]).toMatchObject({ stream: 'stderr' });
    expect(Number.isNaN(Date.parse(lines[0]!.timestamp))).toBe(false);
  });

  it('sends lines while the work runs, not only at the end', async () => {
    const { client, batches } = recordingClient();
    const shipper = createLogShipper(client, { onEnded: () => undefined, intervalMs: 5 });
    shipper.push('stdout', 'early');
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(batches).toEqual([[expect.objectContaining({ message: 'early' })]]);
    await shipper.close();
  });

  it('stops and says so when the API answers 409 (the subject ended), dropping what is left', async () => {
    const { client, batches } = recordingClient(() => new SubjectEndedError('ended'));
    let ended = 0;
    const shipper = createLogShipper(client, { onEnded: () => ended++, intervalMs: 1000 });
    for (let i = 0; i < 700; i++) shipper.push('stdout', `line ${i}`);
    await shipper.close();
    expect(ended).toBe(1);
    expect(batches).toHaveLength(1);
  });

  it('drops a batch the API refuses and carries on with the next', async () => {
    const { client, batches } = recordingClient((batch) => (batch === 0 ? new Error('down') : undefined));
    const shipper = createLogShipper(client, { onEnded: () => undefined, intervalMs: 1000 });
    for (let i = 0; i < 600; i++) shipper.push('stdout', `line ${i}`);
    await shipper.close();
    expect(batches.map((batch) => batch.length)).toEqual([500, 100]);
  });
});
