import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PythonError, runPython, type PythonTarget } from './support/python.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/** browsers.logs.stream through the Python SDK (`kernel` 0.131.0, scripts/python-sdk.sh) against the built service with a real Chromium. */

let service: RunningService;
let target: PythonTarget;
let id: string;

beforeAll(async () => {
  service = await startService();
  target = { url: service.url, apiKey: service.adminKey };
  id = (await service.client().browsers.create({ headless: true, timeout_seconds: 300 })).session_id;
}, 600_000);
afterAll(async () => {
  await service?.client().browsers.deleteByID(id).catch(() => undefined);
  await cleanupServices();
});

describe('browsers.logs.stream through the Python SDK', () => {
  it('reads a file, follows it as a process appends, and reads the agent log', async () => {
    const got = await runPython<{ lines: string[]; followed: string[]; agentReady: boolean }>(
      target,
      `
      c = client()
      sid = ${JSON.stringify(id)}
      c.browsers.fs.write_file(sid, b"py one\\npy two\\n", path="/py.log")
      lines = [e.message for e in c.browsers.logs.stream(sid, source="path", path="/py.log", follow=False)]
      followed = []
      stream = c.browsers.logs.stream(sid, source="path", path="/py.log", follow=True)
      for e in stream:
          followed.append(e.message)
          if e.message == "py two":
              c.browsers.process.exec(sid, command="sh", args=["-c", "echo py three >> /py.log"])
          if e.message == "py three":
              break
      stream.close()
      agent = [e.message for e in c.browsers.logs.stream(sid, source="supervisor", supervisor_process="agent", follow=False)]
      emit({"lines": lines, "followed": followed, "agentReady": any("browser ready" in m for m in agent)})
      `,
    );
    expect(got).toEqual({ lines: ['py one', 'py two'], followed: ['py one', 'py two', 'py three'], agentReady: true });
  });

  it('gets the 404 of a missing file as an error before any event', async () => {
    const error = await runPython(target, `list(client().browsers.logs.stream(${JSON.stringify(id)}, source="path", path="/none.log"))`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PythonError);
    expect(error).toMatchObject({ status: 404, body: { code: 'not_found' } });
  });
});
