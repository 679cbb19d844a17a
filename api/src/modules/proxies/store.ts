import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { escapeLike } from '../projects/store.js';

export type ProxyType = 'datacenter' | 'isp' | 'residential' | 'mobile' | 'custom';
export type ProxyStatus = 'available' | 'unavailable';

export interface ProxyRow {
  id: string;
  org_id: string;
  project_id: string;
  name: string;
  type: ProxyType;
  protocol: 'http' | 'https';
  bypass_hosts: string[];
  /** Managed: country, city, ... Custom: host, port, username (never the password). */
  config: Record<string, string | number>;
  host: string | null;
  password_sealed: string | null;
  upstream_key: string | null;
  status: ProxyStatus | null;
  last_checked: Date | null;
  ip_address: string | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

const COLUMNS = `id, org_id, project_id, name, type, protocol, bypass_hosts, config, host, password_sealed,
  upstream_key, status, last_checked, ip_address, created_at, updated_at, deleted_at`;

export interface NewProxy {
  id: string;
  orgId: string;
  projectId: string;
  name: string;
  type: ProxyType;
  protocol: 'http' | 'https';
  bypassHosts: string[];
  config: Record<string, string | number>;
  host: string | null;
  passwordSealed: string | null;
  upstreamKey: string | null;
  now: Date;
}

export async function insertProxy(db: Queryable, p: NewProxy): Promise<ProxyRow> {
  const { rows } = await db.query<ProxyRow>(
    `INSERT INTO proxies (id, org_id, project_id, name, name_key, type, protocol, bypass_hosts, config, host,
                          password_sealed, upstream_key, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
     RETURNING ${COLUMNS}`,
    [
      p.id,
      p.orgId,
      p.projectId,
      p.name,
      foldName(p.name),
      p.type,
      p.protocol,
      p.bypassHosts,
      JSON.stringify(p.config),
      p.host,
      p.passwordSealed,
      p.upstreamKey,
      p.now,
    ],
  );
  return rows[0]!;
}

/** A live proxy of the project; other orgs' and projects' proxies are simply not found. */
export async function findProxy(db: Queryable, orgId: string, projectId: string, id: string): Promise<ProxyRow | undefined> {
  const { rows } = await db.query<ProxyRow>(
    `SELECT ${COLUMNS} FROM proxies WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL`,
    [orgId, projectId, id],
  );
  return rows[0];
}

export interface ProxyFilter {
  name?: string | undefined;
  query?: string | undefined;
  limit: number;
  offset: number;
}

export async function listProxies(db: Queryable, orgId: string, projectId: string, filter: ProxyFilter): Promise<ProxyRow[]> {
  const { rows } = await db.query<ProxyRow>(
    `SELECT ${COLUMNS} FROM proxies
      WHERE org_id = $1 AND project_id = $2 AND deleted_at IS NULL
        AND ($3::text IS NULL OR name_key = $3)
        AND ($4::text IS NULL
             OR name_key LIKE '%' || $4 || '%' ESCAPE '\\'
             OR host ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR ip_address ILIKE '%' || $5 || '%' ESCAPE '\\'
             OR id = $6)
      ORDER BY created_at DESC, seq DESC
      LIMIT $7 OFFSET $8`,
    [
      orgId,
      projectId,
      filter.name === undefined ? null : foldName(filter.name),
      filter.query === undefined ? null : escapeLike(foldName(filter.query)),
      filter.query === undefined ? null : escapeLike(filter.query),
      filter.query ?? null,
      filter.limit + 1,
      filter.offset,
    ],
  );
  return rows;
}

export async function renameProxy(db: Queryable, row: ProxyRow, name: string, now: Date): Promise<ProxyRow | undefined> {
  const { rows } = await db.query<ProxyRow>(
    `UPDATE proxies SET name = $4, name_key = $5, updated_at = $6
      WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL
      RETURNING ${COLUMNS}`,
    [row.org_id, row.project_id, row.id, name, foldName(name), now],
  );
  return rows[0];
}

export async function softDeleteProxy(db: Queryable, row: ProxyRow, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE proxies SET deleted_at = $4, updated_at = $4
      WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL`,
    [row.org_id, row.project_id, row.id, now],
  );
  return rowCount === 1;
}

export async function recordProxyHealth(
  db: Queryable,
  row: ProxyRow,
  health: { status: ProxyStatus; ipAddress: string | null; checkedAt: Date },
): Promise<ProxyRow | undefined> {
  const { rows } = await db.query<ProxyRow>(
    `UPDATE proxies SET status = $4, ip_address = $5, last_checked = $6
      WHERE org_id = $1 AND project_id = $2 AND id = $3 AND deleted_at IS NULL
      RETURNING ${COLUMNS}`,
    [row.org_id, row.project_id, row.id, health.status, health.ipAddress, health.checkedAt],
  );
  return rows[0];
}

export async function countLiveProjectProxies(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM proxies WHERE project_id = $1 AND deleted_at IS NULL',
    [projectId],
  );
  return rows[0]?.n ?? 0;
}
