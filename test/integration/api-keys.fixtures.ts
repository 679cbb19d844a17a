import { expect } from 'vitest';
import type { HttpClient, HttpResponse } from '../support/http.js';
import type { Tenant } from '../support/test-app.js';

/** Shapes and helpers shared by the API key, tenancy and project resolution tests. */

export const DAY = 86_400_000;

export interface ApiKey {
  id: string;
  name: string;
  masked_key: string;
  created_at: string;
  created_by: { id: string; email: string; name: string | null };
  deleted_at: string | null;
  expires_at: string | null;
  project_id: string | null;
  project_name: string | null;
}

export interface CreatedApiKey extends ApiKey {
  key: string;
}

export interface ErrorBody {
  code: string;
  message: string;
  details: { code: string; field: string; message: string }[];
}

/** Creates a key through the API and insists that it worked. */
export async function createKey(tenant: Tenant, body: Record<string, unknown>): Promise<CreatedApiKey> {
  const res = await tenant.http.post<CreatedApiKey>('/org/api_keys', body);
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** Creates a project through the API and insists that it worked. */
export async function createProject(tenant: Tenant, name: string): Promise<{ id: string; name: string }> {
  const res = await tenant.http.post<{ id: string; name: string }>('/org/projects', { name });
  expect(res.status, res.text).toBe(200);
  return { id: res.body.id, name: res.body.name };
}

/** Every key of the caller's org, deleted ones included, as the API shows them. */
export async function allKeys(http: HttpClient): Promise<ApiKey[]> {
  const res = await http.get<ApiKey[]>('/org/api_keys?status=all&limit=100');
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** The key as get and list show it: without its plaintext. */
export function withoutPlaintext(created: CreatedApiKey): ApiKey {
  const { key: _plaintext, ...shown } = created;
  return shown;
}

export const idsOf = (keys: ApiKey[]): string[] => keys.map((k) => k.id).sort();

/** The fields an error response names, sorted. */
export const errorFields = (res: HttpResponse): string[] => (res.body as ErrorBody).details.map((d) => d.field).sort();
