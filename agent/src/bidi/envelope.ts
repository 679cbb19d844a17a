/**
 * The outer shape of a WebDriver BiDi command (`{id, method, params}`), checked before
 * anything reaches the mapper: chromium-bidi leaves this to its transport (its own
 * WindowBidiTransport does the same checks inside the mapper tab), and a client must get
 * a BiDi error for garbage, never a crash of the agent that owns the browser.
 */

export interface BidiCommand {
  id: number;
  method: string;
  params: Record<string, unknown>;
  /** chromium-bidi's extension: events and responses are tagged with the channel of the command. */
  'goog:channel'?: string;
}

export interface BidiErrorResponse {
  type: 'error';
  /** null when the message had no usable id (the spec's answer to an unparsable message). */
  id: number | null;
  error: string;
  message: string;
}

export type ParsedMessage = { ok: true; command: BidiCommand } | { ok: false; response: BidiErrorResponse };

/** Error codes from the spec's table (https://w3c.github.io/webdriver-bidi/#errors) that this layer answers itself. */
export const BIDI_ERROR = {
  invalidArgument: 'invalid argument',
  invalidSessionId: 'invalid session id',
  sessionNotCreated: 'session not created',
} as const;

export function bidiError(id: number | null, error: string, message: string): BidiErrorResponse {
  return { type: 'error', id, error, message };
}

export function parseBidiMessage(text: string): ParsedMessage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return invalid(null, 'the message is not valid JSON');
  }
  if (!isObject(value)) return invalid(null, `expected a JSON object, got ${jsonType(value)}`);
  const { id, method, params } = value;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) return invalid(null, `expected "id" to be an unsigned integer, got ${jsonType(id)}`);
  if (typeof method !== 'string' || method === '') return invalid(id, `expected "method" to be a non-empty string, got ${jsonType(method)}`);
  if (!isObject(params)) return invalid(id, `expected "params" to be an object, got ${jsonType(params)}`);
  const channel = value['goog:channel'];
  if (channel !== undefined && typeof channel !== 'string') return invalid(id, `expected "goog:channel" to be a string, got ${jsonType(channel)}`);
  // An empty channel means none, as in chromium-bidi's own transport.
  return { ok: true, command: { id, method, params, ...(channel ? { 'goog:channel': channel } : {}) } };
}

function invalid(id: number | null, message: string): ParsedMessage {
  return { ok: false, response: bidiError(id, BIDI_ERROR.invalidArgument, message) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}
