import { randomUUID } from 'node:crypto';
import type { BidiTransport } from 'chromium-bidi/out/Default/gen/src/bidiMapper/BidiMapper.js';
import type { ChromiumBidi } from 'chromium-bidi/out/Default/gen/src/protocol/protocol.js';
import { Session } from 'chromium-bidi/out/Default/gen/src/protocol-parser/generated/webdriver-bidi.js';
import { BIDI_ERROR, bidiError, parseBidiMessage, type BidiCommand } from './envelope.js';

/**
 * The mapper's BiDi side of one client connection, and the session lifecycle the mapper
 * leaves to whoever hosts it (chromium-bidi's own server does this in its WebSocket
 * server): one session per connection, created by session.new; nothing but session.new
 * and session.status before it (the mapper has not attached to any tab until then, so it
 * would answer with an empty world); session.end answers success and then closes the
 * connection, without touching the browser other clients share.
 */

type SessionState = 'none' | 'creating' | 'active' | 'ended';

/** What the transport needs of the client's socket. */
export interface ClientLink {
  send(text: string): void;
  /** Closes the connection once what was sent has gone out (session.end). */
  end(): void;
}

const WITHOUT_SESSION = new Set(['session.new', 'session.status']);

export class ClientTransport implements BidiTransport {
  private toMapper: ((command: ChromiumBidi.Command) => Promise<void> | void) | null = null;
  private state: SessionState = 'none';
  private sessionNewId: number | undefined;

  constructor(private readonly client: ClientLink) {}

  setOnMessage(handler: (command: ChromiumBidi.Command) => Promise<void> | void): void {
    this.toMapper = handler;
  }

  /** Mapper output (responses and events) to the client. */
  sendMessage(message: ChromiumBidi.Message): void {
    const fields = message as Record<string, unknown>;
    if (this.state === 'creating' && fields.id === this.sessionNewId) {
      this.state = fields.type === 'success' ? 'active' : 'none';
      // The mapper has no session id of its own ("unknown"); clients log and compare it.
      const result = fields.result as { sessionId?: unknown } | undefined;
      if (fields.type === 'success' && result) result.sessionId = randomUUID();
    }
    this.client.send(JSON.stringify(message));
  }

  close(): void {
    this.toMapper = null;
  }

  /** A text frame from the client. */
  receive(text: string): void {
    if (this.state === 'ended') return;
    const parsed = parseBidiMessage(text);
    if (!parsed.ok) return this.reply(parsed.response);
    const command = parsed.command;
    if (command.method === 'session.new') return this.newSession(command);
    if (command.method === 'session.end') return this.endSession(command);
    if (this.state !== 'active' && !WITHOUT_SESSION.has(command.method)) {
      return this.reply(bidiError(command.id, BIDI_ERROR.invalidSessionId, 'no session on this connection: send session.new first'));
    }
    this.forward(command);
  }

  private newSession(command: BidiCommand): void {
    if (this.state !== 'none') return this.reply(bidiError(command.id, BIDI_ERROR.sessionNotCreated, 'this connection already has a session'));
    // The mapper marks its session created before reading the capabilities, so a malformed
    // session.new would leave the connection unable to ever create one: check it here.
    const checked = Session.NewParametersSchema.safeParse(command.params);
    if (!checked.success) {
      const problems = checked.error.errors.map((e) => `${e.message} at ${e.path.join('.') || 'params'}`).join('; ');
      return this.reply(bidiError(command.id, BIDI_ERROR.invalidArgument, `invalid session.new parameters: ${problems}`));
    }
    this.state = 'creating';
    this.sessionNewId = command.id;
    this.forward(command);
  }

  private endSession(command: BidiCommand): void {
    if (this.state !== 'active') return this.reply(bidiError(command.id, BIDI_ERROR.invalidSessionId, 'no session on this connection'));
    this.state = 'ended';
    this.client.send(JSON.stringify({ type: 'success', id: command.id, result: {} }));
    this.client.end();
  }

  private forward(command: BidiCommand): void {
    void this.toMapper?.(command as unknown as ChromiumBidi.Command);
  }

  private reply(response: object): void {
    this.client.send(JSON.stringify(response));
  }
}
