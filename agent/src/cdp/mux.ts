import type { Logger } from 'pino';
import { readChromiumMessage, rewriteForClient, type ChromiumMessage } from './frames.js';
import type { CdpPipe } from './pipe.js';
import { applyCdpPolicy, type CdpPolicy } from './policy.js';

/**
 * Every consumer of CDP in the agent (each /cdp client, each BiDi mapper, the agent's own
 * reset and viewport work) gets a virtual connection over the one pipe to Chromium, which
 * behaves like a WebSocket of its own to the browser endpoint:
 *
 * - A virtual connection is a browser-target session (Target.attachToBrowserTarget on the
 *   pipe's root): Chromium gives it its own Target domain state (auto-attach, discovery,
 *   disposeOnDetach contexts), exactly as it does a new connection. A client message
 *   without a sessionId goes to that session, and what comes back on it is delivered
 *   without the sessionId, so clients never learn it.
 * - Every other session is owned by the connection it was attached through: the child of
 *   a Target.attachedToTarget event on one of its sessions, or the result of its own
 *   Target.attachToTarget / attachToBrowserTarget. A message naming a session the
 *   connection does not own is refused with Chromium's own error, so no client can reach
 *   another's pages or read its events. Events go only to the owner.
 * - Command ids are renumbered on the way in (one counter for the pipe) and put back on
 *   the way out: Chromium answers a command for a session that has just gone away without
 *   any sessionId, and only the id then says whose it was.
 * - Closing a connection detaches its browser session; Chromium then detaches every
 *   session attached through it (no event for those: checked), so the mux forgets them.
 * - A client bringing a tab to the front (Target.activateTarget, Page.bringToFront, a
 *   Target.createTarget neither hidden nor in the background) is told to onActivation listeners: a headless browser has no focus to observe (every
 *   tab stays "visible"), and a headless recording follows the tab in front.
 */

export interface VirtualConnection {
  /** A client's message (JSON text); bad ones are answered with a CDP error, never thrown. */
  send(text: string): void;
  /** Messages for the client, in Chromium's order. */
  setOnMessage(handler: (text: string) => void): void;
  /** Once, when the connection ends from Chromium's side (browser gone) or by close(). */
  onClose(handler: () => void): void;
  /** Detaches the connection's sessions; idempotent. */
  close(): void;
}

interface Pending {
  connection: Connection | undefined;
  clientId: number;
  /** Target.attachToTarget / attachToBrowserTarget: the answer names a session it then owns. */
  attaches: boolean;
  sessionId: string | undefined;
  /** The target a Target.attachToTarget names, remembered for the session it makes. */
  targetId?: string;
  /** A Target.createTarget of a tab in front (not hidden, not in the background): its answer names an activated target. */
  createsFront?: boolean;
  resolve?: (message: Record<string, unknown>) => void;
}

/** Commands by which a client brings a tab to the front; a headless recording follows it (replay/screencast.ts). */
const ACTIVATIONS = new Set(['Target.activateTarget', 'Page.bringToFront']);
const ATTACHED_TARGET = /"targetInfo":\{"targetId":"([^"\\]{1,128})"/;

/** Chromium's own answers to these mistakes. */
const ERRORS = {
  parse: { code: -32700, message: 'Message must be a valid JSON' },
  invalid: { code: -32600, message: "Message must have integer 'id' property" },
  method: { code: -32600, message: "Message must have string 'method' property" },
  session: { code: -32001, message: 'Session with given id not found.' },
};
const MAX_ID = 0x7fffffff;

export class CdpMux {
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();
  /** Session id -> the connection that owns it and the session it was attached through. */
  private readonly sessions = new Map<string, { connection: Connection; parent: string | undefined; targetId?: string | undefined }>();
  private readonly activationListeners = new Set<(targetId: string) => void>();
  /** The target a client brought to the front last, if any. */
  private front: string | undefined;
  private readonly connections = new Set<Connection>();
  /** A browser session attached ahead of the next connect() (prepareConnection); undefined inside if attaching failed. */
  private spare: Promise<string | undefined> | undefined;

  constructor(
    private readonly pipe: CdpPipe,
    private readonly log: Logger,
    /** What clients' commands may do (policy.ts); the agent's own commands are not checked. */
    private readonly policy?: CdpPolicy,
  ) {
    pipe.setOnMessage((text) => {
      try {
        this.route(text);
      } catch (error) {
        this.log.warn({ err: error, head: text.slice(0, 200) }, 'CDP message from Chromium could not be routed: dropped');
      }
    });
    pipe.onClose(() => {
      for (const connection of [...this.connections]) connection.ended();
      for (const [id, pending] of this.pending) if (pending.resolve) pending.resolve({ id, error: { code: -32000, message: 'the browser closed the CDP pipe' } });
      this.pending.clear();
    });
  }

  /** A command on the pipe's root (the agent's own: start-up, Browser.close, attaching). */
  async command<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    if (this.pipe.isClosed()) throw new Error(`${method}: the browser closed the CDP pipe`);
    const answer = await new Promise<Record<string, unknown>>((resolve) => {
      const id = this.allocate({ connection: undefined, clientId: 0, attaches: false, sessionId: undefined, resolve });
      this.pipe.send(JSON.stringify({ id, method, params }));
    });
    const error = answer.error as { message?: string } | undefined;
    if (error) throw new Error(`${method}: ${error.message ?? 'failed'}`);
    return answer.result as T;
  }

  /**
   * Attaches the next connection's browser session ahead of time, so connect() need not
   * wait for Chromium: the agent calls it once Chromium is ready (a freshly started
   * Chromium takes tens of ms to answer while it opens its first page, and the first
   * client came to wait for that). Nothing is ever sent on the session before connect()
   * hands it out, so it is as fresh as one attached then. At most one is kept.
   */
  prepareConnection(): void {
    if (this.spare || this.pipe.isClosed()) return;
    const spare = this.command<{ sessionId: string }>('Target.attachToBrowserTarget').then(
      ({ sessionId }) => sessionId,
      () => undefined,
    );
    this.spare = spare;
    // Chromium may end a session by itself (detachedFromTarget on the root): forgotten then.
    void spare.then((sessionId) => {
      if (sessionId === undefined && this.spare === spare) this.spare = undefined;
    });
  }

  /** A new virtual connection, as good as a new WebSocket to the browser endpoint. */
  async connect(): Promise<VirtualConnection> {
    const spare = this.spare;
    this.spare = undefined;
    const prepared = spare ? await spare : undefined;
    // Another for the next client (a pool's next holder, a second tool), off its clock too.
    if (spare) this.prepareConnection();
    const sessionId = prepared ?? (await this.command<{ sessionId: string }>('Target.attachToBrowserTarget')).sessionId;
    if (this.pipe.isClosed()) throw new Error('Target.attachToBrowserTarget: the browser closed the CDP pipe');
    const connection = new Connection(this, sessionId);
    this.connections.add(connection);
    this.sessions.set(sessionId, { connection, parent: undefined });
    return connection;
  }

  /** Hears the targets clients bring to the front; returns the unsubscribe. */
  onActivation(listener: (targetId: string) => void): () => void {
    this.activationListeners.add(listener);
    return () => this.activationListeners.delete(listener);
  }

  /** The target a client brought to the front last (it may have closed since). */
  frontTarget(): string | undefined {
    return this.front;
  }

  /** How many virtual connections are open (for tests and logs). */
  size(): number {
    return this.connections.size;
  }

  /** @internal From a connection: its client's message, checked and sent on. */
  sendFor(connection: Connection, text: string): void {
    let message: Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(text);
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return connection.deliver(JSON.stringify({ error: ERRORS.parse }));
      message = parsed as Record<string, unknown>;
    } catch {
      return connection.deliver(JSON.stringify({ error: ERRORS.parse }));
    }
    const { id, method, sessionId } = message;
    if (typeof id !== 'number' || !Number.isSafeInteger(id)) return connection.deliver(JSON.stringify({ error: ERRORS.invalid }));
    if (typeof method !== 'string') return connection.deliver(JSON.stringify({ id, error: ERRORS.method }));
    const target = sessionId === undefined ? connection.browserSession : sessionId;
    if (typeof target !== 'string' || this.sessions.get(target)?.connection !== connection) {
      return connection.deliver(JSON.stringify({ id, error: ERRORS.session }));
    }
    const verdict = this.policy ? applyCdpPolicy(this.policy, method, message.params) : { params: message.params };
    if ('refuse' in verdict) {
      this.log.info({ method }, 'CDP command refused by the browser policy');
      return connection.deliver(JSON.stringify({ id, ...(sessionId === undefined ? {} : { sessionId }), error: { code: -32000, message: verdict.refuse } }));
    }
    const attaches = method === 'Target.attachToTarget' || method === 'Target.attachToBrowserTarget';
    const named = (message.params as { targetId?: unknown } | undefined)?.targetId;
    const targetId = typeof named === 'string' ? named : undefined;
    if (ACTIVATIONS.has(method)) this.activated(method === 'Page.bringToFront' ? this.sessions.get(target)?.targetId : targetId);
    const createsFront = method === 'Target.createTarget' && opensInFront(verdict.params);
    const wireId = this.allocate({ connection, clientId: id, attaches, sessionId: target, targetId, createsFront });
    this.pipe.send(JSON.stringify({ ...message, ...(verdict.params === undefined ? {} : { params: verdict.params }), id: wireId, sessionId: target }));
  }

  /** @internal Detaches a connection's browser session; its other sessions go with it. */
  release(connection: Connection): void {
    if (!this.connections.delete(connection)) return;
    for (const [sessionId, owner] of this.sessions) if (owner.connection === connection) this.sessions.delete(sessionId);
    for (const [id, pending] of this.pending) if (pending.connection === connection) this.pending.delete(id);
    if (this.pipe.isClosed()) return;
    this.command('Target.detachFromTarget', { sessionId: connection.browserSession }).catch((error: unknown) =>
      this.log.debug({ err: error }, 'detaching a closed CDP connection failed (the browser may be closing)'),
    );
  }

  private allocate(pending: Pending): number {
    do this.nextId = this.nextId >= MAX_ID ? 1 : this.nextId + 1;
    while (this.pending.has(this.nextId));
    this.pending.set(this.nextId, pending);
    return this.nextId;
  }

  private route(text: string): void {
    const message = readChromiumMessage(text);
    if (message.id !== undefined) return this.routeResponse(text, message, message.id);
    if (message.sessionId === undefined) return this.rootEvent(message);
    const owner = this.sessions.get(message.sessionId);
    // A session being forgotten (its connection closed) may still say something: nobody hears it.
    if (!owner) return;
    const connection = owner.connection;
    if (message.method === 'Target.attachedToTarget' && message.namedSession) {
      const targetId = (message.parsed ? JSON.stringify(message.parsed) : text.slice(0, 400)).match(ATTACHED_TARGET)?.[1];
      this.sessions.set(message.namedSession, { connection, parent: message.sessionId, targetId });
    }
    connection.deliver(rewriteForClient(text, message, undefined, message.sessionId === connection.browserSession));
    if (message.method === 'Target.detachedFromTarget' && message.namedSession) this.forget(message.namedSession);
  }

  private routeResponse(text: string, message: ChromiumMessage, wireId: number): void {
    const pending = this.pending.get(wireId);
    if (!pending) return;
    this.pending.delete(wireId);
    if (pending.resolve) return pending.resolve(message.parsed ?? (JSON.parse(text) as Record<string, unknown>));
    const connection = pending.connection!;
    if (pending.createsFront) {
      const created = ((message.parsed ?? (JSON.parse(text) as Record<string, unknown>)).result as { targetId?: unknown } | undefined)?.targetId;
      if (typeof created === 'string') this.activated(created);
    }
    if (pending.attaches) {
      const parsed = message.parsed ?? (JSON.parse(text) as { result?: { sessionId?: unknown } });
      const child = (parsed.result as { sessionId?: unknown } | undefined)?.sessionId;
      if (typeof child === 'string' && !this.sessions.has(child)) this.sessions.set(child, { connection, parent: pending.sessionId, targetId: pending.targetId });
    }
    const session = message.sessionId ?? pending.sessionId;
    const dropSession = message.sessionId !== undefined && session === connection.browserSession;
    connection.deliver(rewriteForClient(text, message, pending.clientId, dropSession));
  }

  private activated(targetId: string | undefined): void {
    if (targetId === undefined) return;
    this.front = targetId;
    for (const listener of this.activationListeners) listener(targetId);
  }

  /** The root hears of browser sessions going away: a connection Chromium ended itself. */
  private rootEvent(message: ChromiumMessage): void {
    if (message.method !== 'Target.detachedFromTarget' || !message.namedSession) return;
    const detached = message.namedSession;
    const spare = this.spare;
    void spare?.then((sessionId) => {
      if (sessionId === detached && this.spare === spare) this.spare = undefined;
    });
    const owner = this.sessions.get(message.namedSession);
    if (owner && owner.connection.browserSession === message.namedSession) owner.connection.ended();
  }

  /** A detached session and every session attached through it. */
  private forget(sessionId: string): void {
    const gone = new Set([sessionId]);
    for (let grew = true; grew; ) {
      grew = false;
      for (const [id, { parent }] of this.sessions) {
        if (parent && gone.has(parent) && !gone.has(id)) {
          gone.add(id);
          grew = true;
        }
      }
    }
    for (const id of gone) this.sessions.delete(id);
    // Chromium never answers what was in flight to a detached session; its clients give up on it too.
    for (const [id, pending] of this.pending) if (pending.sessionId && gone.has(pending.sessionId)) this.pending.delete(id);
  }
}

/** A tab a client opens comes to the front unless it asked for a hidden or background one (the agent's curl pages are hidden). */
function opensInFront(params: unknown): boolean {
  const given = (params ?? {}) as { hidden?: unknown; background?: unknown };
  return given.hidden !== true && given.background !== true;
}

class Connection implements VirtualConnection {
  private handler: ((text: string) => void) | undefined;
  private readonly queued: string[] = [];
  private readonly closeHandlers: (() => void)[] = [];
  private open = true;

  constructor(
    private readonly mux: CdpMux,
    readonly browserSession: string,
  ) {}

  send(text: string): void {
    if (this.open) this.mux.sendFor(this, text);
  }

  setOnMessage(handler: (text: string) => void): void {
    this.handler = handler;
    for (const text of this.queued.splice(0)) handler(text);
  }

  onClose(handler: () => void): void {
    if (this.open) this.closeHandlers.push(handler);
    else queueMicrotask(handler);
  }

  close(): void {
    this.ended();
  }

  /** @internal */
  deliver(text: string): void {
    if (!this.open) return;
    if (this.handler) this.handler(text);
    else this.queued.push(text);
  }

  /** @internal From either side: forget and detach (a no-op on a closed pipe), then tell the owner. */
  ended(): void {
    if (!this.open) return;
    this.open = false;
    this.mux.release(this);
    for (const handler of this.closeHandlers.splice(0)) handler();
  }
}
