import { rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import busboy from 'busboy';
import { sendJson } from '../http-json.js';
import type { AgentState } from '../agent-state.js';
import { ExtensionZipError, inspectExtensionZip } from '../../../lib/extension-zip.js';
import { MAX_EXTENSION_ZIP_BYTES, unpackExtension } from './unpack.js';

/**
 * POST /extensions: zips loaded into the running browser, as the SDKs send them:
 * `extensions[0][name]` + `extensions[0][zip_file]` (TypeScript), `extensions[][name]`
 * (Python, brackets without an index) or `extensions.name` (Go, as Kernel's own server
 * reads them); parts without an index pair up in order. Every zip is checked and every
 * name too before anything is unpacked; then Chromium restarts with them (agent.ts).
 */

/** Most extensions one browser loads, and the most one request may carry in all. */
export const MAX_LOADED_EXTENSIONS = 20;
const MAX_REQUEST_ZIP_BYTES = 2 * MAX_EXTENSION_ZIP_BYTES;
const NAME = /^[A-Za-z0-9._-]{1,255}$/;
const FIELD = /^extensions(?:\[(\d*)\]\[(name|zip_file)\]|\.(name|zip_file))$/;

class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

interface Item {
  name?: string;
  zip?: Buffer;
}

/** Collects the items: indexed parts by index, the others in order (a field seen twice opens the next item). */
class Items {
  readonly byKey = new Map<string, Item>();
  private open = 0;
  add(fieldName: string, set: (item: Item) => void, has: (item: Item) => boolean): void {
    const match = FIELD.exec(fieldName);
    if (!match) throw new Refusal(400, 'invalid_request', `unexpected field ${JSON.stringify(fieldName)}: send extensions[i][name] and extensions[i][zip_file]`);
    let key = match[1] ? `i${match[1]}` : `o${this.open}`;
    if (!match[1] && this.byKey.has(key) && has(this.byKey.get(key)!)) key = `o${++this.open}`;
    const item = this.byKey.get(key) ?? {};
    if (has(item)) throw new Refusal(400, 'invalid_request', `${fieldName} is sent twice`);
    if (!this.byKey.has(key) && this.byKey.size >= MAX_LOADED_EXTENSIONS) throw new Refusal(400, 'too_many_extensions', `at most ${MAX_LOADED_EXTENSIONS} extensions may be loaded`);
    set(item);
    this.byKey.set(key, item);
  }
}

function readItems(request: IncomingMessage): Promise<Item[]> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: request.headers, limits: { fieldSize: 1024, fields: 2 * MAX_LOADED_EXTENSIONS, files: MAX_LOADED_EXTENSIONS, fileSize: MAX_EXTENSION_ZIP_BYTES } });
    } catch (error) {
      reject(new Refusal(400, 'invalid_request', `expected multipart/form-data: ${(error as Error).message}`));
      return;
    }
    const items = new Items();
    let failure: Error | undefined;
    let total = 0;
    const fail = (error: unknown) => (failure ??= error instanceof Error ? error : new Error(String(error)));
    parser.on('field', (name, value) => {
      try {
        items.add(name, (item) => (item.name = value.trim()), (item) => item.name !== undefined);
      } catch (error) {
        fail(error);
      }
    });
    parser.on('file', (name, stream) => {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (total > MAX_REQUEST_ZIP_BYTES) fail(new Refusal(413, 'extension_too_large', `the zips are larger than ${MAX_REQUEST_ZIP_BYTES} bytes in all`));
        else chunks.push(chunk);
      });
      stream.once('limit', () => fail(new Refusal(413, 'extension_too_large', `a zip is larger than ${MAX_EXTENSION_ZIP_BYTES} bytes`)));
      // A part cut off by the form's end is destroyed with an error: the parser's own error answers the request.
      stream.on('error', (error: Error) => fail(new Refusal(400, 'invalid_request', `malformed multipart body: ${error.message}`)));
      stream.once('end', () => {
        try {
          items.add(name, (item) => (item.zip = Buffer.concat(chunks)), (item) => item.zip !== undefined);
        } catch (error) {
          fail(error);
        }
      });
    });
    for (const event of ['filesLimit', 'fieldsLimit'] as const) parser.on(event, () => fail(new Refusal(400, 'too_many_extensions', `at most ${MAX_LOADED_EXTENSIONS} extensions may be loaded`)));
    // busboy may emit 'error' more than once (a bad part header, then the form's end): `on`, not `once`, or the second ends the process.
    parser.on('error', (error: Error) => {
      request.unpipe(parser);
      request.resume();
      reject(failure ?? new Refusal(400, 'invalid_request', `malformed multipart body: ${error.message}`));
    });
    parser.once('close', () => (failure ? reject(failure) : resolve([...items.byKey.values()])));
    request.pipe(parser);
  });
}

/** Names and zips checked, all of them, before anything is written. */
async function checkItems(items: Item[], loaded: string[]): Promise<{ name: string; zip: Buffer }[]> {
  if (items.length === 0) throw new Refusal(400, 'invalid_request', 'no extensions were sent');
  if (loaded.length + items.length > MAX_LOADED_EXTENSIONS) throw new Refusal(400, 'too_many_extensions', `a browser loads at most ${MAX_LOADED_EXTENSIONS} extensions`);
  const seen = new Set<string>();
  const checked: { name: string; zip: Buffer }[] = [];
  for (const { name, zip } of items) {
    if (name === undefined || zip === undefined) throw new Refusal(400, 'invalid_request', 'each extension needs both a name and a zip_file');
    if (!NAME.test(name) || name === '.' || name === '..') throw new Refusal(400, 'invalid_request', `extension name ${JSON.stringify(name)} must be 1 to 255 letters, digits, ".", "_" or "-"`);
    if (seen.has(name) || loaded.includes(name)) throw new Refusal(409, 'extension_already_loaded', `an extension named ${JSON.stringify(name)} is already loaded in this browser`);
    seen.add(name);
    try {
      await inspectExtensionZip(zip);
    } catch (error) {
      if (!(error instanceof ExtensionZipError)) throw error;
      throw new Refusal(error.reason === 'too_large' ? 413 : 400, error.reason === 'too_large' ? 'extension_too_large' : 'invalid_extension', `extension ${JSON.stringify(name)} was refused: ${error.message}`);
    }
    checked.push({ name, zip });
  }
  return checked;
}

export async function handleExtensionsRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const host = state.extensions;
  if (state.phase() !== 'ready' || !host) return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
  const unpacked: string[] = [];
  try {
    const items = await checkItems(await readItems(request), host.loadedNames());
    for (const { name, zip } of items) unpacked.push(await unpackExtension(host.workRoot(), name, zip));
    await host.load(unpacked, items.map((i) => i.name));
  } catch (error) {
    if (!(error instanceof Refusal)) {
      await Promise.all(unpacked.map((dir) => rm(dir, { recursive: true, force: true })));
      return sendJson(response, 500, { code: 'extensions_not_loaded', message: error instanceof Error ? error.message : String(error) });
    }
    if (!request.readableEnded) request.resume();
    return sendJson(response, error.status, { code: error.code, message: error.message });
  }
  response.writeHead(204).end();
}
