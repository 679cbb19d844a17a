import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { agentEndpoint, agentFetch, type AgentEndpoint } from '../../../../contract/agent-client.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, noContent, type ResponseSpec, type RouteDef, type RouteResult } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import {
  batchBody,
  clickMouseBody,
  clipboardSchema,
  clipboardWriteBody,
  cursorBody,
  cursorResultSchema,
  dragMouseBody,
  emptyBody,
  mousePositionSchema,
  moveMouseBody,
  pressKeyBody,
  screenshotBody,
  scrollBody,
  typeTextBody,
} from './computer-schema.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';

/**
 * POST /browsers/{id}/computer/* (CONTRACT.md §2.3): validated here, then forwarded to
 * the session's agent, which drives a headful browser's own X display with xdotool, xwd,
 * xclip and unclutter, and a headless one through CDP on the page shown (docs/computer.md).
 */

const tags = ['Browser computer control'];
const pngSchema = z.string().describe('PNG bytes');
const AGENT_TIMEOUT_MS = 130_000;

type Answer = 'void' | 'json' | 'png';

interface Operation {
  suffix: string;
  operationId: string;
  summary: string;
  body: z.ZodType;
  answer: Answer;
  schema?: z.ZodType;
}

const OPERATIONS: Operation[] = [
  { suffix: 'type', operationId: 'computerTypeText', summary: 'Type text into the focused element', body: typeTextBody, answer: 'void' },
  { suffix: 'press_key', operationId: 'computerPressKey', summary: 'Press keys or key combos (X keysyms)', body: pressKeyBody, answer: 'void' },
  { suffix: 'click_mouse', operationId: 'computerClickMouse', summary: 'Click, press or release a mouse button at a point', body: clickMouseBody, answer: 'void' },
  { suffix: 'move_mouse', operationId: 'computerMoveMouse', summary: 'Move the pointer, optionally along a Bezier curve', body: moveMouseBody, answer: 'void' },
  { suffix: 'drag_mouse', operationId: 'computerDragMouse', summary: 'Drag along a path with a button held', body: dragMouseBody, answer: 'void' },
  { suffix: 'scroll', operationId: 'computerScroll', summary: 'Scroll the wheel at a point', body: scrollBody, answer: 'void' },
  { suffix: 'screenshot', operationId: 'computerScreenshot', summary: 'PNG of the display or a region of it', body: screenshotBody, answer: 'png' },
  { suffix: 'get_mouse_position', operationId: 'computerGetMousePosition', summary: 'Where the pointer is', body: emptyBody, answer: 'json', schema: mousePositionSchema },
  { suffix: 'cursor', operationId: 'computerSetCursor', summary: 'Hide or show the pointer', body: cursorBody, answer: 'json', schema: cursorResultSchema },
  { suffix: 'clipboard/read', operationId: 'computerReadClipboard', summary: 'Text on the clipboard', body: emptyBody, answer: 'json', schema: clipboardSchema },
  { suffix: 'clipboard/write', operationId: 'computerWriteClipboard', summary: 'Put text on the clipboard', body: clipboardWriteBody, answer: 'void' },
  { suffix: 'batch', operationId: 'computerBatch', summary: 'Run actions in order, stopping at the first error', body: batchBody, answer: 'void' },
];

function responsesOf(operation: Operation): Record<number, ResponseSpec> {
  const ok: Record<number, ResponseSpec> =
    operation.answer === 'void'
      ? { 204: { description: 'Done' } }
      : operation.answer === 'png'
        ? { 200: { description: 'PNG image', contentType: 'image/png', schema: pngSchema } }
        : { 200: { description: 'Result', ...(operation.schema ? { schema: operation.schema } : {}) } };
  return { ...ok, ...errorResponses(400, 404, 409, 502) };
}

export function computerRoutes(deps: AppDeps): RouteDef[] {
  return OPERATIONS.map((operation) =>
    defineRoute({
      method: 'post',
      path: `/browsers/{id_or_name}/computer/${operation.suffix}`,
      operationId: operation.operationId,
      summary: operation.summary,
      description:
        'Headful sessions act on their own X display; headless ones through CDP on the page shown, with the same coordinates for the same window size (see docs/computer.md).',
      tags,
      auth: 'project',
      params: browserIdParams,
      body: operation.body,
      responses: responsesOf(operation),
      handler: async ({ params, body, auth, res }): Promise<RouteResult> => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name);
        if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
        const answer = await callAgent(agentEndpoint(deps.agentTokens, session.id, session.agent_url), operation.suffix, body);
        if (operation.answer === 'void') return noContent();
        if (operation.answer === 'json') return json(JSON.parse(answer.toString('utf8')));
        res.status(200).type('image/png').setHeader('content-length', String(answer.length));
        res.end(answer);
        return { kind: 'handled' };
      },
    }),
  );
}

/** The agent's errors keep their status and code; an unreachable agent is a 502. */
async function callAgent(agent: AgentEndpoint, suffix: string, body: unknown): Promise<Buffer> {
  let response: Response;
  try {
    response = await agentFetch(agent, `/computer/${suffix}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body ?? {}),
      signal: AbortSignal.timeout(AGENT_TIMEOUT_MS),
    });
  } catch (error) {
    throw new AppError(502, 'browser_unavailable', 'The browser did not answer', { cause: error });
  }
  const bytes = Buffer.from(await response.arrayBuffer());
  if (response.ok) return bytes;
  let failure: { code?: unknown; message?: unknown } = {};
  try {
    failure = JSON.parse(bytes.toString('utf8')) as typeof failure;
  } catch {
    // not JSON: reported below with the status alone
  }
  const status = [400, 409, 413].includes(response.status) ? response.status : 502;
  const code = typeof failure.code === 'string' ? failure.code : 'browser_error';
  const message = typeof failure.message === 'string' ? failure.message : `The browser answered ${response.status}`;
  throw new AppError(status, status === 502 ? 'browser_error' : code, message, status === 409 ? { shouldRetry: false } : {});
}
