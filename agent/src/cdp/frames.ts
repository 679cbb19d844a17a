/**
 * What the multiplexer (mux.ts) must know of a message from Chromium to route it: its
 * id (a response), its method (an event), its top-level sessionId, and for the two events
 * that change who owns a session, the session they name. Read without JSON.parse when
 * Chromium wrote the message as it does (checked on Chromium 156): responses begin
 * `{"id":<n>,`, events `{"method":"<name>",`, the sessionId is the last key
 * (`,"sessionId":"<id>"}` ends the message), and Target.attachedToTarget and
 * Target.detachedFromTarget put the session's id first in their params. A screenshot
 * answer of tens of MiB is then routed and rewritten with string slices, never parsed.
 *
 * The shortcut is sound for any content: inside a JSON string every `"` is escaped, so an
 * unescaped `"sessionId":"…"}` at the very end, closed by one brace, can only be the
 * top-level key. Anything else is parsed (and then written back out when it is changed).
 */

export interface ChromiumMessage {
  id?: number;
  method?: string;
  sessionId?: string;
  /** The child session of a Target.attachedToTarget / Target.detachedFromTarget event. */
  namedSession?: string;
  /** The text with `"id":<n>,` at the head and the sessionId at the tail cut out, when fast. */
  fast?: { afterId: number; beforeSession: number };
  parsed?: Record<string, unknown>;
}

const HEAD_ID = /^\{"id":(\d+),/;
const HEAD_METHOD = /^\{"method":"([A-Za-z]+\.[A-Za-z]+)",/;
const TAIL_SESSION = /,"sessionId":"([^"\\]{1,128})"\}$/;
const NAMED_SESSION = /^\{"method":"Target\.(?:attachedToTarget|detachedFromTarget)","params":\{"sessionId":"([^"\\]{1,128})"/;
/** How much of the tail the session pattern needs to see. */
const TAIL_WINDOW = 160;

export function readChromiumMessage(text: string): ChromiumMessage {
  const head = text.slice(0, 200);
  const id = HEAD_ID.exec(head);
  const method = id ? undefined : HEAD_METHOD.exec(head);
  const tailStart = Math.max(0, text.length - TAIL_WINDOW);
  const tail = TAIL_SESSION.exec(text.slice(tailStart));
  const message: ChromiumMessage = {};
  if (tail && (id || method)) {
    message.sessionId = tail[1]!;
    message.fast = { afterId: id ? id[0].length : 1, beforeSession: tailStart + tail.index };
  } else if (!text.includes('"sessionId"') && (id || method)) {
    message.fast = { afterId: id ? id[0].length : 1, beforeSession: text.length - 1 };
  } else {
    return parsedMessage(text);
  }
  if (id) message.id = Number(id[1]);
  if (method) {
    message.method = method[1]!;
    if (method[1] === 'Target.attachedToTarget' || method[1] === 'Target.detachedFromTarget') {
      const named = NAMED_SESSION.exec(head);
      if (!named) return parsedMessage(text);
      message.namedSession = named[1]!;
    }
  }
  return message;
}

function parsedMessage(text: string): ChromiumMessage {
  const parsed = JSON.parse(text) as Record<string, unknown>;
  const message: ChromiumMessage = { parsed };
  if (typeof parsed.id === 'number') message.id = parsed.id;
  if (typeof parsed.method === 'string') message.method = parsed.method;
  if (typeof parsed.sessionId === 'string') message.sessionId = parsed.sessionId;
  const params = parsed.params as { sessionId?: unknown } | undefined;
  if ((parsed.method === 'Target.attachedToTarget' || parsed.method === 'Target.detachedFromTarget') && typeof params?.sessionId === 'string') {
    message.namedSession = params.sessionId;
  }
  return message;
}

/**
 * The message as its client sees it: the id back to the client's own (responses), the
 * sessionId removed when `dropSession` (the client's browser session, which it knows as
 * "no session"), everything else as Chromium wrote it.
 */
export function rewriteForClient(text: string, message: ChromiumMessage, clientId: number | undefined, dropSession: boolean): string {
  if (message.fast) {
    const { afterId, beforeSession } = message.fast;
    const start = clientId !== undefined && message.id !== undefined ? `{"id":${clientId},` : text.slice(0, afterId);
    const end = dropSession || message.sessionId === undefined ? '}' : text.slice(beforeSession);
    return start + text.slice(afterId, beforeSession) + end;
  }
  const copy = { ...message.parsed };
  if (clientId !== undefined) copy.id = clientId;
  if (dropSession) delete copy.sessionId;
  return JSON.stringify(copy);
}
