import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { AppError, badRequest } from '../../http/errors.js';

/**
 * Multipart bodies with zips in them, read into memory: each file part is bounded by the
 * zip limit (past it: 413 at once), the number of parts too, so nothing unbounded is held.
 * The zips are small (an extension, not a profile) and go to Postgres as bytea anyway.
 */

export interface FormFile {
  field: string;
  bytes: Buffer;
}

export interface ReadForm {
  fields: { name: string; value: string }[];
  files: FormFile[];
}

const MAX_FIELD_BYTES = 4096;

export function zipTooLarge(maxZipBytes: number, field?: string): AppError {
  const message = `The zip is larger than ${maxZipBytes} bytes (BROWSERPLANE_EXTENSION_MAX_ZIP_MB)`;
  return new AppError(413, 'extension_too_large', message, { details: [{ code: 'extension_too_large', message, ...(field ? { field } : {}) }] });
}

export function readZipForm(request: IncomingMessage, limits: { maxZipBytes: number; maxFiles: number; maxFields: number }): Promise<ReadForm> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: request.headers, limits: { fieldSize: MAX_FIELD_BYTES, fields: limits.maxFields, files: limits.maxFiles, fileSize: limits.maxZipBytes } });
    } catch (error) {
      reject(badRequest('invalid_multipart', `Expected multipart/form-data: ${(error as Error).message}`));
      return;
    }
    const form: ReadForm = { fields: [], files: [] };
    let failure: Error | undefined;
    const fail = (error: Error) => (failure ??= error);
    let reading = 0;
    let closed = false;
    const settle = () => {
      if (!closed || reading > 0) return;
      if (failure) reject(failure);
      else resolve(form);
    };
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) fail(badRequest('invalid_request', `Field ${JSON.stringify(name)} is longer than ${MAX_FIELD_BYTES} bytes`));
      else form.fields.push({ name, value });
    });
    parser.on('file', (field, stream) => {
      reading += 1;
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.once('limit', () => fail(zipTooLarge(limits.maxZipBytes, field)));
      // A part cut off by the form's end is destroyed with an error: the parser's own error answers the request.
      stream.on('error', (error: Error) => fail(badRequest('invalid_multipart', `Malformed multipart body: ${error.message}`)));
      stream.once('end', () => {
        form.files.push({ field, bytes: Buffer.concat(chunks) });
        reading -= 1;
        settle();
      });
    });
    parser.on('filesLimit', () => fail(badRequest('invalid_request', `At most ${limits.maxFiles} files may be sent`)));
    parser.on('fieldsLimit', () => fail(badRequest('invalid_request', `At most ${limits.maxFields} fields may be sent`)));
    // busboy may emit 'error' more than once (a bad part header, then the form's end): `on`, not `once`, or the second ends the process.
    parser.on('error', (error: Error) => {
      request.unpipe(parser);
      request.resume();
      reject(failure ?? badRequest('invalid_multipart', `Malformed multipart body: ${error.message}`));
    });
    parser.once('close', () => {
      closed = true;
      settle();
    });
    request.pipe(parser);
  });
}
