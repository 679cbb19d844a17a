import yazl from 'yazl';
import type { HttpClient, HttpResponse } from '../support/http.js';
import type { TestApp } from '../support/test-app.js';

/** Helpers for the browser filesystem tests: raw bodies, multipart and the host side of "/". */

export interface FsSession {
  id: string;
  client: HttpClient;
  /** Where "/" of this browser is on the host (local runtime only). */
  hostRoot: string;
  cdpWsUrl: string;
}

export async function newFsSession(app: TestApp, client: HttpClient): Promise<FsSession> {
  const res = await client.post('/browsers', { headless: true });
  if (res.status !== 200) throw new Error(`create failed: ${res.status} ${res.text}`);
  const id = res.body.session_id as string;
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [id]);
  const root = (await (await fetch(`${rows[0]!.agent_url}/fs/root`, { headers: { authorization: `Bearer ${app.deps.agentTokens(id)}` } })).json()) as { host_root: string };
  return { id, client, hostRoot: root.host_root, cdpWsUrl: res.body.cdp_ws_url as string };
}

export async function rawRequest(
  client: HttpClient,
  method: string,
  path: string,
  body?: string | Uint8Array | FormData,
  headers: Record<string, string> = {},
): Promise<HttpResponse & { bytes: Buffer }> {
  const res = await fetch(client.baseUrl + path, {
    method,
    headers: { ...client.extraHeaders, authorization: `Bearer ${client.key}`, ...headers },
    ...(body !== undefined ? { body } : {}),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  const text = bytes.toString('utf8');
  const isJson = (res.headers.get('content-type') ?? '').includes('application/json') && text;
  return { status: res.status, headers: res.headers, body: isJson ? JSON.parse(text) : text, text, bytes };
}

export function writeFile(session: FsSession, path: string, content: string | Buffer, mode?: string) {
  const query = new URLSearchParams({ path, ...(mode ? { mode } : {}) });
  return rawRequest(session.client, 'PUT', `/browsers/${session.id}/fs/write_file?${query.toString()}`, new Uint8Array(Buffer.from(content)), {
    'content-type': 'application/octet-stream',
  });
}

export function readFile(session: FsSession, path: string) {
  return rawRequest(session.client, 'GET', `/browsers/${session.id}/fs/read_file?${new URLSearchParams({ path }).toString()}`);
}

export function fsGet(session: FsSession, op: string, path: string) {
  return session.client.get(`/browsers/${session.id}/fs/${op}?${new URLSearchParams({ path }).toString()}`);
}

export function fsPut(session: FsSession, op: string, body: unknown) {
  return session.client.put(`/browsers/${session.id}/fs/${op}`, body);
}

export function uploadFiles(session: FsSession, files: { dest: string; content: string }[]) {
  const form = new FormData();
  files.forEach((file, i) => {
    form.append(`files[${i}][dest_path]`, file.dest);
    form.append(`files[${i}][file]`, new Blob([file.content], { type: 'application/octet-stream' }), 'f.bin');
  });
  return rawRequest(session.client, 'POST', `/browsers/${session.id}/fs/upload`, form);
}

export function uploadZip(session: FsSession, dest: string, zip: Buffer) {
  const form = new FormData();
  form.append('dest_path', dest);
  form.append('zip_file', new Blob([new Uint8Array(zip)], { type: 'application/zip' }), 'a.zip');
  return rawRequest(session.client, 'POST', `/browsers/${session.id}/fs/upload_zip`, form);
}

export function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, content] of Object.entries(files)) zip.addBuffer(Buffer.from(content), name);
  zip.end();
  const chunks: Buffer[] = [];
  return new Promise((resolve, reject) => {
    zip.outputStream.on('data', (chunk: Buffer) => chunks.push(chunk));
    zip.outputStream.on('end', () => resolve(Buffer.concat(chunks)));
    zip.outputStream.on('error', reject);
  });
}
