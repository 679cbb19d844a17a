import { newId } from '../../ids.js';
import type { Queryable } from '../../db/pool.js';

export interface OrgRow {
  id: string;
  name: string;
  owner_email: string;
  default_project_max_concurrent_sessions: number | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, name, owner_email, default_project_max_concurrent_sessions, created_at, updated_at';

export async function insertOrg(db: Queryable, input: { name: string; ownerEmail: string; now: Date }): Promise<OrgRow> {
  const { rows } = await db.query<OrgRow>(
    `INSERT INTO orgs (id, name, owner_email, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) RETURNING ${COLUMNS}`,
    [newId('org'), input.name, input.ownerEmail, input.now],
  );
  return rows[0]!;
}

export async function getOrg(db: Queryable, id: string): Promise<OrgRow> {
  const { rows } = await db.query<OrgRow>(`SELECT ${COLUMNS} FROM orgs WHERE id = $1`, [id]);
  if (!rows[0]) throw new Error(`org ${id} vanished`);
  return rows[0];
}

export async function firstOrg(db: Queryable): Promise<OrgRow | undefined> {
  const { rows } = await db.query<OrgRow>(`SELECT ${COLUMNS} FROM orgs ORDER BY created_at, id LIMIT 1`);
  return rows[0];
}

export async function setDefaultProjectSessionCap(db: Queryable, id: string, cap: number | null, now: Date): Promise<OrgRow> {
  const { rows } = await db.query<OrgRow>(
    `UPDATE orgs SET default_project_max_concurrent_sessions = $2, updated_at = $3 WHERE id = $1 RETURNING ${COLUMNS}`,
    [id, cap, now],
  );
  return rows[0]!;
}
