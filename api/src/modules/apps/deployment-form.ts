import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { AppError, badRequest } from '../../http/errors.js';

/**
 * POST /deployments as the SDKs send it: multipart/form-data with a `file` part, plain
 * fields (entrypoint_rel_path, version, force, region), env_vars as `env_vars[KEY]` (TS
 * and Python SDKs) or `env_vars.KEY` (Go SDK, so `kernel deploy -e`) fields, and `source`
 * as one JSON field (TS SDK, `kernel deploy github`), as `source[type]`,
 * `source[auth][token]` brackets (Python SDK) or as `source.type` dots (Go SDK). busboy parses it: streaming, the
 * parser under multer, already what the browser file API uses. The file is spooled to
 * disk as it arrives (never held whole in memory), hashed on the way for the
 * content-addressed store, and cut off with a 413 at the upload limit.
 */

export interface SpooledFile {
  path: string;
  size: number;
  sha256: string;
  /** The name the client gave the part, if any. */
  filename: string | undefined;
}

export interface ReceivedForm {
  fields: Map<string, string>;
  envVars: Record<string, string>;
  /** `source[...]` / `source.x` fields, by their path (`auth.token`); the JSON form is a plain field. */
  sourceFields: Map<string, string>;
  file: SpooledFile | undefined;
}

const MAX_FIELDS = 1000;
const MAX_FIELD_BYTES = 64 * 1024;
const ENV_FIELD = /^env_vars(?:\[(.+)\]|\.(.+))$/s;
/** `source[auth][token]` or `source.auth.token`: the path inside source, or undefined. */
function sourcePath(name: string): string | undefined {
  const brackets = /^source((?:\[[^[\]]+\])+)$/.exec(name);
  if (brackets) return [...brackets[1]!.matchAll(/\[([^[\]]+)\]/g)].map((m) => m[1]).join('.');
  const dots = /^source\.(.+)$/s.exec(name);
  return dots?.[1];
}

const malformed = (error: Error) => badRequest('invalid_multipart', `Malformed multipart body: ${error.message}`);

export async function readDeploymentForm(request: IncomingMessage, spoolDir: string, maxUploadBytes: number): Promise<ReceivedForm> {
  await mkdir(spoolDir, { recursive: true, mode: 0o700 });
  const form: ReceivedForm = { fields: new Map(), envVars: {}, sourceFields: new Map(), file: undefined };
  try {
    await parse(request, form, spoolDir, maxUploadBytes);
  } catch (error) {
    if (form.file) await rm(form.file.path, { force: true });
    throw error;
  }
  return form;
}

function parse(request: IncomingMessage, form: ReceivedForm, spoolDir: string, maxUploadBytes: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: request.headers, limits: { fieldSize: MAX_FIELD_BYTES, fields: MAX_FIELDS, files: 1, fileSize: maxUploadBytes } });
    } catch (error) {
      reject(badRequest('invalid_multipart', `Expected multipart/form-data: ${(error as Error).message}`));
      return;
    }
    let failure: Error | undefined;
    let spooling = Promise.resolve();
    const fail = (error: Error) => {
      failure ??= error;
    };
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) return fail(badRequest('invalid_request', `Field ${JSON.stringify(name)} is longer than ${MAX_FIELD_BYTES} bytes`));
      const env = ENV_FIELD.exec(name);
      const key = env?.[1] ?? env?.[2];
      const inSource = sourcePath(name);
      // A plain object's __proto__ key sets its prototype instead: refused rather than lost.
      if (key === '__proto__') fail(badRequest('invalid_request', 'env_vars[__proto__] is not a variable name this service takes'));
      else if (key !== undefined && Object.hasOwn(form.envVars, key)) fail(badRequest('invalid_request', `env var ${JSON.stringify(key)} is sent twice`));
      else if (key !== undefined) form.envVars[key] = value;
      else if (inSource !== undefined && form.sourceFields.has(inSource)) fail(badRequest('invalid_request', `Field ${JSON.stringify(name)} is sent twice`));
      else if (inSource !== undefined) form.sourceFields.set(inSource, value);
      else if (form.fields.has(name)) fail(badRequest('invalid_request', `Field ${JSON.stringify(name)} is sent twice`));
      else form.fields.set(name, value);
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'file' || form.file) {
        if (name === 'file') fail(badRequest('invalid_request', 'Only one file part may be sent'));
        // Drained; a part the form's end cuts off errors, and the parser's own error answers for it.
        stream.on('error', () => undefined);
        stream.resume();
        return;
      }
      const file: SpooledFile = { path: path.join(spoolDir, `upload-${randomBytes(8).toString('hex')}`), size: 0, sha256: '', filename: info.filename };
      form.file = file;
      spooling = spool(stream, file, maxUploadBytes).catch((error: unknown) => {
        stream.resume();
        fail(error as Error);
      });
    });
    parser.on('filesLimit', () => fail(badRequest('invalid_request', 'Only one file part may be sent')));
    parser.on('fieldsLimit', () => fail(badRequest('invalid_request', `At most ${MAX_FIELDS} fields may be sent`)));
    // busboy may emit 'error' more than once (a bad part header, then the form's end): `on`, not `once`, or the second ends the process.
    parser.on('error', (error: Error) => {
      request.unpipe(parser);
      request.resume();
      fail(malformed(error));
      reject(failure ?? malformed(error));
    });
    parser.once('close', () => {
      void spooling.then(() => (failure ? reject(failure) : resolve()));
    });
    request.pipe(parser);
  });
}

async function spool(source: Readable, file: SpooledFile, maxUploadBytes: number): Promise<void> {
  const hash = createHash('sha256');
  let truncated = false;
  source.once('limit', () => (truncated = true));
  const count = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      file.size += chunk.length;
      hash.update(chunk);
      callback(null, chunk);
    },
  });
  await pipeline(source, count, createWriteStream(file.path, { flags: 'wx', mode: 0o600 }));
  if (truncated || file.size > maxUploadBytes) {
    const message = `The upload is larger than ${maxUploadBytes} bytes (BROWSERPLANE_APP_MAX_UPLOAD_MB)`;
    throw new AppError(413, 'upload_too_large', message, { details: [{ code: 'upload_too_large', message, field: 'file' }] });
  }
  file.sha256 = hash.digest('hex');
}

/**
 * The form's `source` as the JSON text the schema reads: the JSON field as sent, or the
 * bracket/dot fields nested into one object (`auth.token` → {auth: {token}}).
 */
export function sourceOfForm(form: ReceivedForm): string | undefined {
  const json = form.fields.get('source');
  if (form.sourceFields.size === 0) return json;
  if (json !== undefined) throw badRequest('invalid_request', 'Send source once: as a JSON field or as source[...] fields, not both');
  const root: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  for (const [fieldPath, value] of form.sourceFields) {
    const keys = fieldPath.split('.');
    let node = root;
    for (const [index, key] of keys.entries()) {
      const last = index === keys.length - 1;
      const existing = node[key];
      if (key === '' || (last ? existing !== undefined : typeof existing === 'string')) {
        throw badRequest('invalid_request', `Field source.${fieldPath} conflicts with another source field`);
      }
      if (last) node[key] = value;
      else node = (node[key] ??= Object.create(null)) as Record<string, unknown>;
    }
  }
  return JSON.stringify(root);
}
