import { isIP } from 'node:net';
import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { badRequest, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import type { ProjectScope } from '../../scope.js';
import { shareLockLiveProject } from '../projects/store.js';
import { egressIp, pinProxyEndpoint, pinPublicTarget, probeThroughProxy, type ProbeTarget, type ProxyEndpoint } from './probe.js';
import type { CreateProxyInput } from './schema.js';
import {
  countLiveProjectProxies,
  findProxy,
  insertProxy,
  listProxies,
  recordProxyHealth,
  renameProxy,
  softDeleteProxy,
  type ProxyFilter,
  type ProxyRow,
  type ProxyStatus,
} from './store.js';
import { findUpstreamByKey, pickUpstream, upstreamKey, type ManagedProxyType } from './upstreams.js';

type Deps = Pick<AppDeps, 'db' | 'clock' | 'log' | 'sealer' | 'proxy'>;

export const DEFAULT_CHECK_TIMEOUT_MS = 5000;
/** Managed types whose country defaults to US (the SDK documents this default). */
const COUNTRY_DEFAULTS_TO_US = new Set(['datacenter', 'isp']);

const passwordContext = (id: string) => `proxy:${id}:password`;

interface Health {
  status: ProxyStatus;
  lastChecked: Date;
}

/** The wire shape: the password is never part of it, only whether there is one. */
export function presentProxy(row: ProxyRow, override?: Health) {
  const config =
    row.type === 'custom'
      ? {
          host: row.config.host as string,
          port: row.config.port as number,
          ...(row.config.username !== undefined ? { username: row.config.username as string } : {}),
          has_password: row.password_sealed !== null,
        }
      : row.config;
  const status = override?.status ?? row.status;
  const lastChecked = override?.lastChecked ?? row.last_checked;
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    protocol: row.protocol,
    bypass_hosts: row.bypass_hosts,
    config,
    ...(status !== null ? { status } : {}),
    ...(lastChecked !== null ? { last_checked: lastChecked.toISOString() } : {}),
    ...(row.ip_address !== null ? { ip_address: row.ip_address } : {}),
  };
}

export async function createProxy(deps: Deps, scope: ProjectScope, input: CreateProxyInput): Promise<ProxyRow> {
  const id = newId('proxy');
  const now = deps.clock.now();
  const common = { id, orgId: scope.orgId, projectId: scope.projectId, bypassHosts: input.bypass_hosts ?? [], now };
  let fields: Pick<Parameters<typeof insertProxy>[1], 'name' | 'protocol' | 'config' | 'host' | 'passwordSealed' | 'upstreamKey'>;
  if (input.type === 'custom') {
    const { host, port, username, password } = input.config;
    fields = {
      name: input.name ?? `${host}:${port}`,
      protocol: input.protocol ?? 'http',
      config: { host, port, ...(username !== undefined ? { username } : {}) },
      host,
      passwordSealed: password === undefined ? null : deps.sealer.seal(password, passwordContext(id)),
      upstreamKey: null,
    };
  } else {
    const config: Record<string, string> = { ...input.config };
    if (config.country === undefined && COUNTRY_DEFAULTS_TO_US.has(input.type)) config.country = 'US';
    const upstream = pickUpstream(deps.proxy.upstreams, { type: input.type, protocol: input.protocol, config });
    if (!upstream) throw noUpstream(input.type, input.protocol, config);
    fields = {
      name: input.name ?? (config.country ? `${input.type}-${config.country.toLowerCase()}` : input.type),
      protocol: input.protocol ?? (new URL(upstream.url).protocol === 'https:' ? 'https' : 'http'),
      config,
      host: null,
      passwordSealed: null,
      upstreamKey: upstreamKey(upstream),
    };
  }
  // The share lock keeps a concurrent project delete from missing the new proxy.
  return inTransaction(deps.db, async (tx) => {
    if (!(await shareLockLiveProject(tx, scope.orgId, scope.projectId))) throw notFound('Project', scope.projectId);
    return insertProxy(tx, { ...common, type: input.type, ...fields });
  });
}

function noUpstream(type: ManagedProxyType, protocol: string | undefined, config: Record<string, string>) {
  const wanted = Object.entries(config).map(([k, v]) => `${k}=${v}`);
  if (protocol) wanted.push(`protocol=${protocol}`);
  return badRequest(
    'no_matching_upstream',
    `No upstream proxy configured on this server serves ${type} proxies` +
      (wanted.length ? ` with ${wanted.join(', ')}` : '') +
      '; the operator lists upstreams in BROWSERPLANE_PROXY_UPSTREAMS (see docs/PROXIES.md)',
    [{ code: 'no_matching_upstream', field: 'body.config', message: `no configured upstream serves this ${type} proxy` }],
  );
}

export async function getProxy(deps: Pick<Deps, 'db'>, scope: ProjectScope, id: string): Promise<ProxyRow> {
  const row = await findProxy(deps.db, scope.orgId, scope.projectId, id);
  if (!row) throw notFound('Proxy', id);
  return row;
}

export async function listProjectProxies(deps: Pick<Deps, 'db'>, scope: ProjectScope, filter: ProxyFilter): Promise<ProxyRow[]> {
  return listProxies(deps.db, scope.orgId, scope.projectId, filter);
}

export async function renameProjectProxy(deps: Deps, scope: ProjectScope, id: string, name: string): Promise<ProxyRow> {
  const row = await getProxy(deps, scope, id);
  const updated = await renameProxy(deps.db, row, name, deps.clock.now());
  if (!updated) throw notFound('Proxy', id);
  return updated;
}

export async function deleteProjectProxy(deps: Deps, scope: ProjectScope, id: string): Promise<void> {
  const row = await getProxy(deps, scope, id);
  if (!(await softDeleteProxy(deps.db, row, deps.clock.now()))) throw notFound('Proxy', id);
}

/**
 * Where traffic for this proxy goes: the custom endpoint with its opened password, or the
 * bound upstream as configured now. Undefined when the bound upstream is no longer
 * configured. For the browser runtime as well as the check.
 */
export function proxyEndpoint(deps: Pick<Deps, 'sealer' | 'proxy'>, row: ProxyRow): ProxyEndpoint | undefined {
  if (row.type === 'custom') {
    const host = row.config.host as string;
    return {
      uri: `${row.protocol}://${isIP(host) === 6 ? `[${host}]` : host}:${row.config.port as number}`,
      username: row.config.username as string | undefined,
      password: row.password_sealed === null ? undefined : deps.sealer.open(row.password_sealed, passwordContext(row.id)),
    };
  }
  const upstream = row.upstream_key === null ? undefined : findUpstreamByKey(deps.proxy.upstreams, row.upstream_key);
  if (!upstream) return undefined;
  const url = new URL(upstream.url);
  return {
    uri: `${url.protocol}//${url.host}`,
    username: url.username ? decodeURIComponent(url.username) : undefined,
    password: url.password ? decodeURIComponent(url.password) : undefined,
  };
}

/**
 * Fetches the check URL through the proxy. With the configured URL the result is the
 * proxy's health and is stored; with a caller's URL it only answers "is that site
 * reachable through this proxy" and the stored health stays as it was.
 */
export async function checkProxy(deps: Deps, scope: ProjectScope, id: string, url: string | undefined) {
  const row = await getProxy(deps, scope, id);
  const target: ProbeTarget = url
    ? await pinPublicTarget(url, { allowPrivate: deps.proxy.allowPrivateCheckUrls ?? false })
    : { url: deps.proxy.checkUrl };
  const configured = proxyEndpoint(deps, row);
  const endpoint = configured && row.type === 'custom' && deps.proxy.egress ? await pinProxyEndpoint(configured, deps.proxy.egress) : configured;
  const result = endpoint
    ? await probeThroughProxy(endpoint, target, deps.proxy.checkTimeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS)
    : { error: `upstream ${JSON.stringify(row.upstream_key)} is no longer configured` };
  const checkedAt = deps.clock.now();
  const reached = 'statusCode' in result && result.statusCode >= 200 && result.statusCode < 400;
  const status: ProxyStatus = reached ? 'available' : 'unavailable';
  deps.log.info(
    {
      proxy_id: row.id,
      status,
      custom_url: url !== undefined,
      ...('statusCode' in result ? { status_code: result.statusCode } : { reason: result.error }),
    },
    'proxy check',
  );
  if (url !== undefined) return presentProxy(row, { status, lastChecked: checkedAt });
  const ipAddress = 'statusCode' in result && result.statusCode < 300 ? egressIp(result.body) : null;
  const updated = await recordProxyHealth(deps.db, row, { status, ipAddress: reached ? ipAddress : null, checkedAt });
  if (!updated) throw notFound('Proxy', id);
  return presentProxy(updated);
}

/** Live proxies keep their project from being deleted. */
export const countProjectProxies: ProjectResourceCounter = async (db, projectId) => ({
  kind: 'proxies',
  count: await countLiveProjectProxies(db, projectId),
});
