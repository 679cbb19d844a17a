import type { Logger } from 'pino';
import WebSocket, { type RawData } from 'ws';
import { BidiServer } from 'chromium-bidi/out/Default/gen/src/bidiMapper/BidiMapper.js';
import { BidiParser } from 'chromium-bidi/out/Default/gen/src/bidiTab/BidiParser.js';
import { MapperCdpConnection } from 'chromium-bidi/out/Default/gen/src/cdp/CdpConnection.js';
import { LogType, type LoggerFn } from 'chromium-bidi/out/Default/gen/src/utils/log.js';
import type { Transport } from 'chromium-bidi/out/Default/gen/src/utils/transport.js';
import type { CdpMux, VirtualConnection } from '../cdp/mux.js';
import { ClientTransport } from './client-transport.js';
import { BIDI_ERROR, bidiError } from './envelope.js';

/**
 * One BiDi client's mapper: chromium-bidi's BidiServer running in the agent process over
 * its own virtual CDP connection on the pipe to Chromium (cdp/mux.ts), as puppeteer-core
 * does for `protocol: 'webDriverBiDi'` on Chrome (BidiOverCdp.js). Each client gets its
 * own mapper and CDP connection, so clients (BiDi and CDP alike) never see each other's
 * sessions, subscriptions or auto-attach settings.
 */
/** Below the service's 10 s wait for the agent's upgrade, so the client hears why. */
const START_TIMEOUT_MS = 8_000;

export class BidiMapperSession {
  private client: WebSocket | undefined;
  private closed = false;

  private constructor(
    private readonly cdp: VirtualConnection,
    private readonly server: BidiServer,
    private readonly transport: ClientTransport,
    private readonly log: Logger,
  ) {
    cdp.onClose(() => this.close(1001, 'the browser closed'));
  }

  /** Opens a virtual connection and starts a mapper; rejects (and leaves nothing open) if either fails. */
  static async start(mux: CdpMux, log: Logger): Promise<BidiMapperSession> {
    const cdp = await connectWithin(mux, START_TIMEOUT_MS);
    // The mapper says nothing before the client is attached: it only answers commands.
    let session: BidiMapperSession | undefined;
    const link = { send: (message: string) => session?.sendToClient(message), end: () => session?.close(1000, 'session ended') };
    try {
      const started = (async () => {
        const connection = new MapperCdpConnection(new VirtualConnectionTransport(cdp), mapperLogger(log));
        const browserClient = await connection.createBrowserSession();
        const transport = new ClientTransport(link);
        const server = await BidiServer.createAndStart(transport, connection, browserClient, '', new BidiParser(), mapperLogger(log));
        return { server, transport };
      })();
      const { server, transport } = await withDeadline(started, cdp);
      session = new BidiMapperSession(cdp, server, transport, log);
      return session;
    } catch (error) {
      cdp.close();
      throw error;
    }
  }

  /** Connects the accepted client: its text frames go to the mapper, the mapper's output back. */
  attach(client: WebSocket): void {
    this.client = client;
    if (this.closed) return void client.close(1001, 'the browser closed');
    client.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) {
        this.sendToClient(JSON.stringify(bidiError(null, BIDI_ERROR.invalidArgument, 'BiDi messages are text frames; got a binary frame')));
        return;
      }
      this.transport.receive(text(data));
    });
    client.on('close', () => this.close(1000, 'client left'));
    client.on('error', (error) => this.log.debug({ err: error }, 'BiDi client socket error'));
  }

  /**
   * Idempotent. The CDP connection is closed without MapperCdpConnection.close(), which would
   * reject every CDP call in flight into mapper code: a rejection nobody handles would end
   * the agent (and the browser with it). Left unanswered, they are collected with the mapper.
   */
  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.server.close();
    this.cdp.close();
    const client = this.client;
    if (client && (client.readyState === WebSocket.OPEN || client.readyState === WebSocket.CONNECTING)) client.close(code, reason);
  }

  private sendToClient(text: string): void {
    if (this.client?.readyState === WebSocket.OPEN) this.client.send(text);
  }
}

/** A virtual CDP connection as chromium-bidi's raw-text Transport. */
class VirtualConnectionTransport implements Transport {
  private onMessage: ((message: string) => Promise<void> | void) | null = null;

  constructor(private readonly connection: VirtualConnection) {
    connection.setOnMessage((message) => void this.onMessage?.(message));
  }

  setOnMessage(handler: (message: string) => Promise<void> | void): void {
    this.onMessage = handler;
  }

  /** A command sent after the connection closed is dropped: see BidiMapperSession.close. */
  sendMessage(message: string): void {
    this.connection.send(message);
  }

  close(): void {
    this.onMessage = null;
    this.connection.close();
  }
}

/** A hung Chromium never answers the attach: the client hears why instead of waiting; a late connection is closed. */
function connectWithin(mux: CdpMux, timeoutMs: number): Promise<VirtualConnection> {
  return new Promise((resolve, reject) => {
    let late = false;
    const timer = setTimeout(() => {
      late = true;
      reject(new Error(`Chromium did not open a CDP connection for the BiDi mapper within ${timeoutMs} ms`));
    }, timeoutMs);
    mux.connect().then(
      (connection) => {
        clearTimeout(timer);
        if (late) connection.close();
        else resolve(connection);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** The mapper's start waits on CDP answers that never come if Chromium goes away or hangs. */
function withDeadline<T>(work: Promise<T>, cdp: VirtualConnection): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the BiDi mapper did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    cdp.onClose(() => reject(new Error('Chromium closed the CDP connection while the BiDi mapper started')));
    work.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

function text(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

/** The mapper's own complaints (events it could not deliver, CDP errors) at debug level; protocol traffic never. */
function mapperLogger(log: Logger): LoggerFn | undefined {
  if (!log.isLevelEnabled('debug')) return undefined;
  return (type) =>
    type === LogType.debugError || type === LogType.debugWarn
      ? (...messages: unknown[]) => log.debug({ mapper: type, detail: messages.map((m) => (m instanceof Error ? m.message : String(m))) }, 'BiDi mapper')
      : undefined;
}
