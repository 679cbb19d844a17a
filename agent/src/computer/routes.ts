import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RunningChromium } from '../chromium.js';
import type { XDisplay } from '../display.js';
import { CdpComputer } from './cdp-computer.js';
import type { Body, ComputerOperations, OperationResult } from './checks.js';
import { Computer } from './operations.js';
import { badRequest, ComputerError } from './x11-tools.js';

/**
 * POST /computer/<operation> on the agent. A headful browser's computer acts on its X
 * display (operations.ts); a headless one's, which has no display, through CDP on the
 * page a user would be looking at (cdp-computer.ts), with the same semantics.
 */

const MAX_BODY_BYTES = 1024 * 1024;
/** One computer per display or headless browser, so pointer and cursor state live as long as it does. */
const displayComputers = new WeakMap<XDisplay, Computer>();
const headlessComputers = new WeakMap<RunningChromium, CdpComputer>();

type Operation = (computer: ComputerOperations, body: Body) => Promise<OperationResult> | OperationResult;

const OPERATIONS: Record<string, Operation> = {
  type: (c, b) => c.typeText(b),
  press_key: (c, b) => c.pressKey(b),
  click_mouse: (c, b) => c.clickMouse(b),
  move_mouse: (c, b) => c.moveMouse(b),
  drag_mouse: (c, b) => c.dragMouse(b),
  scroll: (c, b) => c.scroll(b),
  screenshot: (c, b) => c.screenshot(b),
  get_mouse_position: (c) => c.mousePosition(),
  cursor: (c, b) => c.setCursor(b),
  'clipboard/read': (c) => c.readClipboard(),
  'clipboard/write': (c, b) => c.writeClipboard(b),
  batch: (c, b) => runBatch(c, b),
};

/** Batch action types and the single operation each one runs. */
const BATCH_ACTIONS: Record<string, Operation> = {
  click_mouse: OPERATIONS.click_mouse!,
  move_mouse: OPERATIONS.move_mouse!,
  type_text: OPERATIONS.type!,
  press_key: OPERATIONS.press_key!,
  scroll: OPERATIONS.scroll!,
  drag_mouse: OPERATIONS.drag_mouse!,
  set_cursor: OPERATIONS.cursor!,
  sleep: async (_c, b) => {
    const ms = b.duration_ms;
    if (typeof ms !== 'number' || ms < 0 || ms > 60_000) throw badRequest('sleep.duration_ms must be 0..60000');
    await new Promise((resolve) => setTimeout(resolve, ms));
    return { kind: 'none' };
  },
};

/** In order; the first failing action ends the batch, and the error names it. */
async function runBatch(computer: ComputerOperations, body: Body): Promise<OperationResult> {
  if (!Array.isArray(body.actions)) throw badRequest('actions must be an array');
  for (const [index, action] of (body.actions as Body[]).entries()) {
    const type = typeof action?.type === 'string' ? action.type : '';
    const run = BATCH_ACTIONS[type];
    const payload = action?.[type];
    if (!run || typeof payload !== 'object' || payload === null) throw badRequest(`actions[${index}] must have a known type and a payload named after it`);
    try {
      await run(computer, payload as Body);
    } catch (error) {
      const message = `actions[${index}] (${type}) failed: ${error instanceof Error ? error.message : String(error)}`;
      throw error instanceof ComputerError ? new ComputerError(error.status, error.code, message) : new Error(message, { cause: error });
    }
  }
  return { kind: 'none' };
}

export async function handleComputerRequest(chromium: RunningChromium | undefined, request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
  const operation = OPERATIONS[path.slice('/computer/'.length)];
  try {
    if (!operation) throw new ComputerError(404, 'route_not_found', `no computer operation at ${path}`);
    if (request.method !== 'POST') throw new ComputerError(405, 'method_not_allowed', 'computer operations are POST');
    if (!chromium) throw new ComputerError(503, 'not_ready', 'browser not ready');
    const result = await operation(computerOf(chromium), await readBody(request));
    if (result.kind === 'png') return send(response, 200, 'image/png', result.png);
    if (result.kind === 'json') return send(response, 200, 'application/json', Buffer.from(JSON.stringify(result.body)));
    response.writeHead(204).end();
  } catch (error) {
    if (!(error instanceof ComputerError)) throw error;
    send(response, error.status, 'application/json', Buffer.from(JSON.stringify({ code: error.code, message: error.message })));
  }
}

function computerOf(chromium: RunningChromium): ComputerOperations {
  const { display } = chromium;
  if (display) {
    let computer = displayComputers.get(display);
    if (!computer) displayComputers.set(display, (computer = new Computer(display)));
    return computer;
  }
  let computer = headlessComputers.get(chromium);
  if (!computer) headlessComputers.set(chromium, (computer = new CdpComputer(chromium.cdp)));
  return computer;
}

async function readBody(request: IncomingMessage): Promise<Body> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new ComputerError(413, 'payload_too_large', 'body too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '' || text === 'null') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ComputerError(400, 'invalid_json', 'body is not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw badRequest('body must be a JSON object');
  return parsed as Body;
}

function send(response: ServerResponse, status: number, type: string, body: Buffer): void {
  response.writeHead(status, { 'content-type': type, 'content-length': body.length });
  response.end(body);
}
