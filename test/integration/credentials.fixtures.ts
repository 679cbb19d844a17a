import { expect } from 'vitest';
import type { HttpClient } from '../support/http.js';

/** A credential as the API shows it. */
export interface Credential {
  id: string;
  name: string;
  domain: string;
  created_at: string;
  updated_at: string;
  has_values: boolean;
  has_totp_secret: boolean;
  sso_provider: string | null;
  value_keys?: string[];
  totp_code?: string;
  totp_code_expires_at?: string;
}

/** RFC 6238 Appendix B's SHA-1 seed "12345678901234567890", in base32. */
export const RFC6238_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';

export async function createCredential(http: HttpClient, body: Record<string, unknown>): Promise<Credential> {
  const res = await http.post('/credentials', { domain: 'example.com', values: { username: 'u', password: 'p' }, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body as Credential;
}

/** Every credential of the project the client acts in. */
export async function allCredentials(http: HttpClient, query = ''): Promise<Credential[]> {
  const res = await http.get(`/credentials?limit=100${query}`);
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('x-has-more')).toBe('false');
  return res.body as Credential[];
}
