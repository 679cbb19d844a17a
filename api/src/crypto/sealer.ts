import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Encryption at rest for secrets (credential values, TOTP secrets, proxy passwords):
 * AES-256-GCM with a random 96-bit nonce per value. The associated data binds a
 * ciphertext to the row and field it belongs to, so a sealed value copied into another
 * row or column does not open.
 */
export interface Sealer {
  seal(plaintext: string, context: string): string;
  /** Throws when the value was not sealed by this key for this context. */
  open(sealed: string, context: string): string;
}

const VERSION = 'v1';
export const KEY_BYTES = 32;

export function createSealer(key: Buffer): Sealer {
  if (key.length !== KEY_BYTES) throw new Error(`the encryption key must be ${KEY_BYTES} bytes, got ${key.length}`);
  return {
    seal(plaintext, context) {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${VERSION}.${nonce.toString('base64url')}.${body.toString('base64url')}`;
    },
    open(sealed, context) {
      const [version, nonce, body] = sealed.split('.');
      if (version !== VERSION || !nonce || !body) throw new Error('not a sealed value');
      const data = Buffer.from(body, 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
      decipher.setAAD(Buffer.from(context, 'utf8'));
      decipher.setAuthTag(data.subarray(data.length - 16));
      return Buffer.concat([decipher.update(data.subarray(0, data.length - 16)), decipher.final()]).toString('utf8');
    },
  };
}

/** Decodes BROWSERPLANE_ENCRYPTION_KEY: 32 bytes as base64, base64url or hex. */
export function decodeKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  if (/^[0-9a-f]{64}$/i.test(trimmed)) return Buffer.from(trimmed, 'hex');
  const bytes = Buffer.from(trimmed, trimmed.includes('-') || trimmed.includes('_') ? 'base64url' : 'base64');
  return bytes.length === KEY_BYTES ? bytes : undefined;
}

export const ENCRYPTION_KEY_FILE = 'encryption-key';

/**
 * The configured key, or in embedded mode one generated once into the data dir (mode
 * 600). Losing it makes every sealed secret unreadable: back it up with the database.
 */
export async function loadEncryptionKey(configured: string | undefined, dataDir: string): Promise<Buffer> {
  if (configured) {
    const key = decodeKey(configured);
    if (!key) throw new Error('BROWSERPLANE_ENCRYPTION_KEY must be 32 bytes in base64 or hex');
    return key;
  }
  const file = path.join(dataDir, ENCRYPTION_KEY_FILE);
  if (existsSync(file)) {
    const key = decodeKey(await readFile(file, 'utf8'));
    if (!key) throw new Error(`${file} does not hold a 32-byte key`);
    return key;
  }
  const key = randomBytes(KEY_BYTES);
  await writeFile(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  return key;
}
