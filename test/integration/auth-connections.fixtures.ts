import { expect } from 'vitest';
import type { FixedClock } from '../../api/src/clock.js';
import type { HttpClient, HttpResponse } from '../support/http.js';
import type { TestApp } from '../support/test-app.js';

/**
 * What the auth-connection tests share: the connection as the API shows it, unique names,
 * and the helpers that create, list and arrange connections in the test app of a file.
 */

export interface Connection {
  id: string;
  domain: string;
  profile_name: string;
  status: string;
  [field: string]: unknown;
}

export const HOUR_MS = 3_600_000;
let seq = 0;
/** A name no other test uses, so tests never depend on each other's data. */
export const unique = (prefix: string) => `${prefix}-${++seq}`;

/** The helpers, acting through the file's test app (`current`, set in its beforeAll) and its clock. */
export function connectionHelpers(current: () => TestApp, clock: FixedClock) {
  /** A client acting in a fresh project of the first org. */
  const inNewProject = async (name = unique('project')) => {
    const project = await current().tenant.http.post('/org/projects', { name });
    expect(project.status, project.text).toBe(200);
    return { projectId: project.body.id as string, http: current().tenant.http.withHeaders({ 'X-Kernel-Project-Id': project.body.id }) };
  };

  const create = async (client: HttpClient, body: Record<string, unknown>): Promise<Connection> => {
    const res = await client.post('/auth/connections', body);
    expect(res.status, res.text).toBe(200);
    return res.body as Connection;
  };

  const all = async (client: HttpClient, query = ''): Promise<Connection[]> => {
    const res = await client.get(`/auth/connections?limit=100${query}`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('x-has-more')).toBe('false');
    return res.body as Connection[];
  };

  const idsIn = (res: HttpResponse) => (res.body as Array<{ id: string }>).map((c) => c.id);

  const profileNames = async (client: HttpClient): Promise<string[]> => {
    const res = await client.get('/profiles?limit=100');
    expect(res.status, res.text).toBe(200);
    return (res.body as Array<{ name: string }>).map((p) => p.name);
  };

  /** A custom proxy (managed types need upstreams this app does not configure). */
  const createProxy = async (client: HttpClient, name: string) => {
    const res = await client.post('/proxies', { type: 'custom', name, config: { host: 'squid.corp.example', port: 3128 } });
    expect(res.status, res.text).toBe(200);
    return res;
  };

  /** The connection's scheduled health check, as graphile-worker holds it. */
  const jobOf = async (id: string) => {
    const { rows } = await current().database.db.query<{ task_identifier: string; run_at: Date; payload: unknown }>(
      `SELECT j.task_identifier, j.run_at, p.payload FROM graphile_worker.jobs j
         JOIN graphile_worker._private_jobs p ON p.id = j.id WHERE j.key = $1`,
      [`auth-health:${id}`],
    );
    expect(rows.length).toBeLessThanOrEqual(1);
    return rows[0];
  };

  const expectError = (res: HttpResponse, status: number, code: string) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body.code, res.text).toBe(code);
    expect(typeof res.body.message).toBe('string');
  };

  /** Writes a flow as the driver would and makes it the connection's current one. */
  const arrangeFlow = async (
    connection: Connection,
    flow: { status: string; step: string; type?: string; view?: object; startedAt?: Date; sessionId?: string; error?: [string, string]; current?: boolean },
  ) => {
    const id = unique('maflow_arranged');
    const at = flow.startedAt ?? clock.now();
    await current().database.db.query(
      `INSERT INTO auth_flows (id, connection_id, org_id, project_id, type, status, step, view, browser_session_id, error_code, error_message,
         driver, heartbeat_at, expires_at, started_at, updated_at, finished_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'replica_elsewhere', $12, $13, $12, $12, $14)`,
      [
        id,
        connection.id,
        current().tenant.orgId,
        current().tenant.defaultProjectId,
        flow.type ?? 'LOGIN',
        flow.status,
        flow.step,
        JSON.stringify(flow.view ?? {}),
        flow.sessionId ?? null,
        flow.error?.[0] ?? null,
        flow.error?.[1] ?? null,
        at,
        new Date(at.getTime() + 15 * 60_000),
        flow.status === 'IN_PROGRESS' ? null : at,
      ],
    );
    if (flow.current !== false) await current().database.db.query('UPDATE auth_connections SET current_flow_id = $2 WHERE id = $1', [connection.id, id]);
    return id;
  };

  const loginView = {
    fields: [
      { id: 'username', ref: 'username', type: 'identifier', label: 'Username', observed_selector: '#username', required: true },
      { id: 'password', ref: 'password', type: 'password', label: 'Password', observed_selector: '#password', required: true },
    ],
    discovered_fields: [
      { label: 'Username', name: 'username', selector: '#username', type: 'text' },
      { label: 'Password', name: 'password', selector: '#password', type: 'password' },
    ],
    choices: [{ id: 'sso_google', label: 'Sign in with Google', type: 'sso_provider', description: null, observed_selector: '//button[1]' }],
  };
  return { inNewProject, create, all, idsIn, profileNames, createProxy, jobOf, expectError, arrangeFlow, loginView };
}
