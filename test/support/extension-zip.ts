import yazl from 'yazl';

/**
 * Extension zips built in memory for the tests (yazl, as the service's own zips): the
 * marker extension, an MV3 extension whose content script marks every page it runs in
 * (documentElement's data-ext = "loaded"), and whatever broken zip a test needs.
 */

export interface ZipEntry {
  name: string;
  data?: string | Buffer;
  /** Unix mode with its type bits (0o120777 makes a symlink entry). */
  mode?: number;
}

/**
 * yazl refuses unsafe names ("..", "\\", absolute), which is what the refusal tests need:
 * such an entry is written under a placeholder of the same length, then the name's bytes
 * are put in its place (the CRC covers the data, not the name).
 */
export async function zipOf(entries: ZipEntry[]): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  const swaps: [Buffer, Buffer][] = [];
  for (const [index, entry] of entries.entries()) {
    let name = entry.name;
    if (/(^|\/)\.\.(\/|$)|\\|^\//.test(name)) {
      name = `${'Z'.repeat(Math.max(0, Buffer.byteLength(name) - String(index).length - 1))}Q${index}`;
      swaps.push([Buffer.from(name), Buffer.from(entry.name)]);
    }
    if (name.endsWith('/')) zip.addEmptyDirectory(name, entry.mode !== undefined ? { mode: entry.mode } : {});
    else zip.addBuffer(Buffer.from(entry.data ?? ''), name, entry.mode !== undefined ? { mode: entry.mode } : {});
  }
  zip.end();
  const bytes = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    zip.outputStream.on('data', (chunk: Buffer) => chunks.push(chunk));
    zip.outputStream.once('end', () => resolve(Buffer.concat(chunks)));
    zip.outputStream.once('error', reject);
  });
  for (const [placeholder, real] of swaps) {
    for (let at = bytes.indexOf(placeholder); at >= 0; at = bytes.indexOf(placeholder, at + 1)) real.copy(bytes, at);
  }
  return bytes;
}

export const markerManifest = (name = 'page marker') => ({
  manifest_version: 3,
  name,
  version: '1.0.0',
  content_scripts: [{ matches: ['<all_urls>'], js: ['content.js'], run_at: 'document_end' }],
});

/** The marker extension's files, at the root or under `folder/`. */
export function markerEntries(options: { folder?: string; value?: string } = {}): ZipEntry[] {
  const at = options.folder ? `${options.folder}/` : '';
  return [
    ...(options.folder ? [{ name: at }] : []),
    { name: `${at}manifest.json`, data: JSON.stringify(markerManifest()) },
    { name: `${at}content.js`, data: `document.documentElement.dataset.ext = ${JSON.stringify(options.value ?? 'loaded')};\n` },
  ];
}

export const markerZip = (options: { folder?: string; value?: string } = {}) => zipOf(markerEntries(options));

/** A CRX3 package around a zip, as the Chrome Web Store serves them (the header is not checked by the service). */
export function crx3Of(zip: Buffer): Buffer {
  const header = Buffer.from('a stand-in for the signed protobuf header');
  const prefix = Buffer.alloc(12);
  prefix.write('Cr24', 0, 'latin1');
  prefix.writeUInt32LE(3, 4);
  prefix.writeUInt32LE(header.length, 8);
  return Buffer.concat([prefix, header, zip]);
}

/** POST /extensions as the SDK sends it: multipart with `file` and, when given, `name`. */
export function uploadForm(zip: Buffer, name?: string): FormData {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(zip)], { type: 'application/zip' }), 'extension.zip');
  if (name !== undefined) form.append('name', name);
  return form;
}
