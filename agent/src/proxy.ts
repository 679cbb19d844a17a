import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { createServer, isIP, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import type { Logger } from 'pino';
import type { PrepareRequestFunctionOpts, PrepareRequestFunctionResult, RequestError, Server } from 'proxy-chain';
import type { ProxySpec } from '../../contract/browser-runtime.js';
import { isRefusedAddress, OPEN_EGRESS, type EgressRules } from '../../contract/egress.js';
import { loopbackPeerUid } from './peer-uid.js';

/**
 * Chromium's --proxy-server cannot carry credentials, and answering its 407s would need a
 * CDP client or an extension in every browser. So Chromium always talks to a forwarder
 * of ours on loopback (proxy-chain), which adds the upstream's credentials itself. It is
 * always on, even without a proxy, because Chromium's proxy is fixed at launch: with the
 * forwarder in between, PATCH can add, switch or remove the proxy of a running browser.
 *
 * The proxies module produces http and https upstreams (docs/PROXIES.md); both are
 * supported here, others are refused with a clear message.
 */

const UPSTREAM_SCHEMES = ['http:', 'https:'];

/** Thrown for a proxy spec the forwarder cannot use; the message is safe to show (no credentials). */
export class ProxySpecError extends Error {}

/** An upstream route checked and built, not yet in use (ProxyForwarder.prepareRoute). */
export type PreparedRoute = Route;

/** One host rule of a proxy's bypass list, with Chromium's --proxy-bypass-list meaning. */
interface BypassRule {
  host: RegExp;
  port?: number;
}

/** What requests use now: swapped whole, so a request sees one route or the other. */
interface Route {
  /** The upstream with credentials in it, for proxy-chain only; null means direct. */
  upstreamUrl: string | null;
  bypass: BypassRule[];
  /** Connections to upstreams are pooled per route, so a swap can drop the old ones. */
  httpAgent: http.Agent;
  httpsAgent: https.Agent;
  /** Exactly what must never reach a log line. */
  secrets: string[];
  /** For logs: scheme://host:port, never credentials. */
  label: string;
}

/**
 * Bypass entries as Chromium reads them: `host`, `*.suffix` or `.suffix` (subdomains
 * only), other `*` wildcards, IP literals (IPv6 with or without brackets), each with an
 * optional `:port`. Matching ignores case and a trailing dot.
 */
export function parseBypassRule(entry: string): BypassRule | undefined {
  let text = entry.trim().toLowerCase();
  if (text === '' || text.includes('/') || text.startsWith('<')) return undefined;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  if (bracketed) {
    text = bracketed[1]!;
    port = bracketed[2] === undefined ? undefined : Number(bracketed[2]);
  } else if (isIP(text) !== 6) {
    const withPort = /^(.*):(\d+)$/.exec(text);
    if (withPort) {
      text = withPort[1]!;
      port = Number(withPort[2]);
    }
  }
  if (text.startsWith('.')) text = `*${text}`;
  text = text.replace(/\.$/, '');
  const pattern = text
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return { host: new RegExp(`^${pattern}$`), ...(port !== undefined ? { port } : {}) };
}

export function isBypassed(rules: BypassRule[], hostname: string, port: number): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
  return rules.some((rule) => rule.host.test(host) && (rule.port === undefined || rule.port === port));
}

function buildRoute(spec: ProxySpec | null | undefined): Route {
  const agents = { httpAgent: new http.Agent({ keepAlive: true }), httpsAgent: new https.Agent({ keepAlive: true }) };
  if (!spec) return { upstreamUrl: null, bypass: [], ...agents, secrets: [], label: 'direct' };
  let url: URL;
  try {
    url = new URL(spec.url);
  } catch {
    throw new ProxySpecError('the proxy URL is not a valid URL');
  }
  if (!UPSTREAM_SCHEMES.includes(url.protocol)) throw new ProxySpecError(`proxy scheme ${url.protocol.replace(':', '')} is not supported (http or https)`);
  if (!url.hostname) throw new ProxySpecError('the proxy URL has no host');
  // Basic auth joins user and password with a colon: a colon in the user cannot be sent.
  if (spec.username?.includes(':')) throw new ProxySpecError('the proxy username contains a colon, which Basic authentication cannot carry');
  const label = `${url.protocol}//${url.host}`;
  const upstream = new URL(label);
  const secrets: string[] = [];
  if (spec.username !== undefined || spec.password !== undefined) {
    upstream.username = encodeURIComponent(spec.username ?? '');
    upstream.password = encodeURIComponent(spec.password ?? '');
    if (spec.password) secrets.push(spec.password, encodeURIComponent(spec.password), Buffer.from(`${spec.username ?? ''}:${spec.password}`).toString('base64'));
  }
  const bypass = spec.bypassHosts.map(parseBypassRule).filter((rule): rule is BypassRule => rule !== undefined);
  return { upstreamUrl: upstream.href, bypass, ...agents, secrets, label };
}

/**
 * dns.lookup, except that `localhost` and every `*.localhost` name are loopback (RFC
 * 6761 §6.3), as Chromium resolves them by itself. Every page request goes through this
 * forwarder, so without it a site on `app.localhost` would work in a bare Chromium and
 * fail in ours (Node asks the system resolver, which usually does not know the name).
 */
export const localhostAwareLookup = ((hostname: string, options: unknown, callback?: unknown) => {
  const cb = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
  const opts = (typeof options === 'object' && options !== null ? options : typeof options === 'number' ? { family: options } : {}) as dns.LookupOptions;
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) {
    const family = opts.family === 6 ? 6 : 4;
    const address = family === 6 ? '::1' : '127.0.0.1';
    process.nextTick(() => (opts.all ? cb(null, [{ address, family }]) : cb(null, address, family)));
    return;
  }
  dns.lookup(hostname, opts, cb as never);
}) as typeof dns.lookup;

type Resolved = { addresses: dns.LookupAddress[] } | { error: NodeJS.ErrnoException };

function resolveAll(hostname: string): Promise<Resolved> {
  return new Promise((resolve) =>
    localhostAwareLookup(hostname, { all: true }, (error, addresses) => resolve(error ? { error } : { addresses })),
  );
}

/**
 * A dns.lookup that answers with what was resolved (and checked) once already, so the
 * connection goes to exactly the address that was checked: a name cannot answer with a
 * public address for the check and a private one for the connect (DNS rebinding).
 */
function pinnedLookup(resolved: Resolved): typeof dns.lookup {
  return ((_hostname: string, options: unknown, callback?: unknown) => {
    const cb = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
    const opts = (typeof options === 'object' && options !== null ? options : typeof options === 'number' ? { family: options } : {}) as dns.LookupOptions;
    if ('error' in resolved) return process.nextTick(() => cb(resolved.error));
    const family = opts.family === 'IPv4' ? 4 : opts.family === 'IPv6' ? 6 : opts.family;
    const fit = resolved.addresses.filter((entry) => !family || entry.family === family);
    if (fit.length === 0) return process.nextTick(() => cb(Object.assign(new Error(`no IPv${family} address`), { code: 'ENOTFOUND' })));
    process.nextTick(() => (opts.all ? cb(null, fit) : cb(null, fit[0]!.address, fit[0]!.family)));
  }) as typeof dns.lookup;
}

export class ProxyForwarder {
  private proxy?: Promise<Server>;
  private refusal?: typeof RequestError;

  private constructor(
    private readonly listener: NetServer,
    private route: Route,
    private readonly log: Logger,
    private readonly egress: EgressRules,
    private readonly peerUid: Promise<number | undefined>,
  ) {}

  /**
   * Listens on 127.0.0.1 at a free port at once; throws ProxySpecError for an unusable
   * spec. Chromium needs the port in its flags, but proxy-chain takes 50-150 ms of CPU to
   * load, which competes with Chromium's own start on a busy host. So a bare net.Server
   * binds the port, and its connections are handed to proxy-chain's HTTP server, loaded on
   * the first connection or by load() once the browser is up, whichever comes first.
   *
   * `peerUid`: the uid Chromium runs as; with an upstream, connections from any other
   * user are dropped, since the forwarder adds the session's upstream credentials for
   * whoever connects (see admit). Undefined: anyone on the host may connect.
   */
  static async start(
    spec: ProxySpec | undefined,
    log: Logger,
    egress: EgressRules = OPEN_EGRESS,
    peerUid: Promise<number | undefined> = Promise.resolve(undefined),
  ): Promise<ProxyForwarder> {
    const route = buildRoute(spec);
    const listener = createServer({ pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(0, '127.0.0.1', () => resolve());
    });
    const forwarder = new ProxyForwarder(listener, route, log.child({ component: 'proxy-forwarder' }), egress, peerUid);
    listener.on('connection', (socket: Socket) => forwarder.accept(socket));
    forwarder.log.info({ port: forwarder.port, upstream: route.label, block_private_networks: egress.blockPrivate }, 'proxy forwarder listening');
    return forwarder;
  }

  get port(): number {
    return (this.listener.address() as AddressInfo).port;
  }

  /**
   * Every request goes through the forwarder, loopback included (<-loopback>): Chromium
   * otherwise never proxies loopback hosts, which would differ between a session with and
   * without a proxy, and a page could reach the agent's own ports through its host.
   *
   * With private networks blocked, WebRTC is the one way left for a page to send packets
   * by itself (UDP to any ICE candidate it names): it is kept to the proxy, which carries
   * no UDP, so it can only use TURN over TCP through the forwarder, which checks it like
   * any other connection. QUIC is off for every browser (chromium.ts).
   */
  chromiumFlags(): string[] {
    return [
      `--proxy-server=http://127.0.0.1:${this.port}`,
      '--proxy-bypass-list=<-loopback>',
      ...(this.egress.blockPrivate ? ['--webrtc-ip-handling-policy=disable_non_proxied_udp'] : []),
    ];
  }

  /** Loads proxy-chain now (idempotent); resolves when it serves. */
  load(): Promise<void> {
    this.proxy ??= import('proxy-chain').then(({ Server, RequestError }) => {
      this.refusal = RequestError;
      // verbose stays off: proxy-chain's own log lines go to the console and some quote the upstream URL.
      const server = new Server({ verbose: false, prepareRequestFunction: (request) => this.prepare(request) });
      server.on('requestFailed', ({ error }: { error: Error }) => {
        this.log.warn({ error: this.redact(`${error.name}: ${error.message}`) }, 'proxy forwarder request failed');
      });
      server.on('tunnelConnectFailed', ({ response }: { response: http.IncomingMessage }) => {
        const refused = response.statusCode === 407 || response.statusCode === 401;
        this.log.warn({ status_code: response.statusCode, upstream: this.route.label }, refused ? 'upstream proxy refused the credentials' : 'upstream proxy refused a tunnel');
      });
      return server;
    });
    return this.proxy.then(
      () => undefined,
      (error: unknown) => this.log.error({ err: error }, 'proxy forwarder could not load proxy-chain: the browser has no network'),
    );
  }

  /**
   * Takes the new upstream (null: direct) for every request from now on, and closes every
   * open connection from Chromium: its pooled keep-alive sockets and CONNECT tunnels
   * (TLS sessions, WebSockets) would otherwise go on using the old route.
   */
  setUpstream(spec: ProxySpec | null): void {
    this.useRoute(this.prepareRoute(spec));
  }

  /**
   * Checks `spec` and builds its route without using it yet (throws ProxySpecError), so a
   * caller changing several settings can fail before any of them changed. A prepared
   * route that is not used must be dropped with discardRoute.
   */
  prepareRoute(spec: ProxySpec | null): PreparedRoute {
    return buildRoute(spec);
  }

  discardRoute(route: PreparedRoute): void {
    route.httpAgent.destroy();
    route.httpsAgent.destroy();
  }

  useRoute(next: PreparedRoute): void {
    const previous = this.route;
    this.route = next;
    this.proxy?.then((server) => server.closeConnections()).catch(() => undefined);
    previous.httpAgent.destroy();
    previous.httpsAgent.destroy();
    this.log.info({ upstream: next.label, bypass_rules: next.bypass.length }, 'proxy upstream changed');
  }

  async close(): Promise<void> {
    this.route.httpAgent.destroy();
    this.route.httpsAgent.destroy();
    const closed = new Promise((resolve) => this.listener.close(resolve));
    // proxy-chain's server never listened itself: dropping its connections is all it needs.
    await this.proxy?.then((server) => server.closeConnections()).catch(() => undefined);
    await closed;
  }

  private accept(socket: Socket): void {
    const route = this.route;
    void this.admit(socket, route).then((admitted) => {
      if (admitted) this.serve(socket, route);
      else socket.destroy();
    });
  }

  /**
   * Only Chromium's user gets served (see start) while the route has an upstream: without
   * one the forwarder offers nothing a local process could not do by itself, and the
   * check costs a read of /proc/net/tcp (5-10 ms with 2,300 sockets on the host, 25-50 ms
   * with 9,300) on every new connection. A route swap drops every open connection, so
   * one admitted without an upstream never gets to use the next one.
   */
  private async admit(socket: Socket, route: Route): Promise<boolean> {
    const expected = await this.peerUid;
    if (expected === undefined || route.upstreamUrl === null) return true;
    const uid = await loopbackPeerUid(socket);
    if (uid === expected) return true;
    this.log.warn({ peer_uid: uid ?? null, peer_port: socket.remotePort ?? null }, 'proxy forwarder dropped a connection from another user than the browser');
    return false;
  }

  /** `route`: the one it was admitted for; after a swap meanwhile it is admitted again. */
  private serve(socket: Socket, route: Route): void {
    void this.load().then(() =>
      this.proxy!.then(
        (server) => {
          if (route !== this.route) return this.accept(socket);
          server.server.emit('connection', socket);
          socket.resume();
        },
        () => socket.destroy(),
      ),
    );
  }

  private async prepare({ hostname, port }: PrepareRequestFunctionOpts): Promise<PrepareRequestFunctionResult> {
    const { route } = this;
    const direct = route.upstreamUrl === null || isBypassed(route.bypass, hostname, port);
    const result = { upstreamProxyUrl: direct ? null : route.upstreamUrl, httpAgent: route.httpAgent, httpsAgent: route.httpsAgent };
    if (!this.egress.blockPrivate) return { ...result, ...(direct ? { dnsLookup: localhostAwareLookup } : {}) };
    const host = hostname.replace(/^\[|\]$/g, '');
    if (direct) return { ...result, dnsLookup: await this.checked(host, port, 'destination') };
    // Through an upstream, the upstream resolves the name and connects, on its own network,
    // and resolving here would tell nothing about that network (and leak the name to this
    // host's DNS). What this side can see is checked: an IP literal or a localhost name.
    if (isIP(host) || host === 'localhost' || host.endsWith('.localhost')) await this.checked(host, port, 'destination');
    // The upstream itself is a connection this host makes: it must not be a private address
    // either (a custom proxy at 169.254.169.254 or at an agent's port), unless allowed.
    const upstream = new URL(route.upstreamUrl!);
    const upstreamPort = Number(upstream.port) || (upstream.protocol === 'https:' ? 443 : 80);
    return { ...result, dnsLookup: await this.checked(upstream.hostname.replace(/^\[|\]$/g, ''), upstreamPort, 'upstream proxy') };
  }

  /**
   * Resolves `host` once and refuses it (403, logged) when any of its addresses is
   * refused; else returns the lookup that connects to exactly those addresses. A name that
   * does not resolve fails at connect as before, with the resolver's error.
   */
  private async checked(host: string, port: number, role: 'destination' | 'upstream proxy'): Promise<typeof dns.lookup> {
    const resolved = await resolveAll(host);
    if ('error' in resolved) return pinnedLookup(resolved);
    const refused = resolved.addresses.map((entry) => entry.address).filter((address) => isRefusedAddress(this.egress, address));
    if (refused.length === 0 && resolved.addresses.length > 0) return pinnedLookup(resolved);
    const shown = role === 'upstream proxy' ? this.route.label : host;
    this.log.info({ host: shown, port, addresses: refused, role }, 'proxy forwarder refused a private address');
    throw new this.refusal!(
      `Browserplane refused to connect to ${shown}:${port}: it is a loopback, private or link-local address, which browsers of this service may not reach (BROWSERPLANE_BLOCK_PRIVATE_NETWORKS)`,
      403,
    );
  }

  private redact(text: string): string {
    return this.route.secrets.reduce((out, secret) => out.split(secret).join('[redacted]'), text);
  }
}
