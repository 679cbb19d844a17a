import { z } from 'zod';

/**
 * Settings of uploaded extensions and the Chrome Web Store download (docs/extensions.md),
 * spread into config.ts's schema; extensionSettingsOf makes AppSettings.extensions of them.
 */
const MIB = 1024 * 1024;
const positiveInt = (max: number) => z.coerce.number().int().min(1).max(max);

export const extensionConfigFields = {
  BROWSERPLANE_EXTENSION_MAX_ZIP_MB: positiveInt(1024).default(50).describe('Largest extension zip POST /extensions and POST /browsers/{id}/extensions take, MiB (the zip is kept in Postgres)'),
  BROWSERPLANE_EXTENSION_MAX_UNPACKED_MB: positiveInt(4096).default(200).describe('Largest total unpacked size of one extension zip, MiB'),
  BROWSERPLANE_EXTENSION_MAX_ENTRIES: positiveInt(1_000_000).default(5000).describe('Most entries (files and folders) one extension zip may hold'),
  BROWSERPLANE_EXTENSION_MAX_PER_PROJECT: positiveInt(100_000).default(100).describe('Most extensions one project may store'),
  BROWSERPLANE_CHROME_STORE_URL: z
    .url({ protocol: /^https?$/ })
    .default('https://clients2.google.com/service/update2/crx')
    .describe('The Chrome Web Store update service GET /extensions/from_chrome_store downloads CRX packages from'),
  BROWSERPLANE_CHROME_STORE_TIMEOUT_MS: positiveInt(600_000).default(30_000).describe('How long one Chrome Web Store download may take, ms'),
};

type Fields = { [K in keyof typeof extensionConfigFields]: z.output<(typeof extensionConfigFields)[K]> };

export interface ExtensionSettings {
  maxZipBytes: number;
  maxUnpackedBytes: number;
  maxEntries: number;
  maxPerProject: number;
  chromeStoreUrl: string;
  chromeStoreTimeoutMs: number;
}

export const DEFAULT_EXTENSION_SETTINGS: ExtensionSettings = {
  maxZipBytes: 50 * MIB,
  maxUnpackedBytes: 200 * MIB,
  maxEntries: 5000,
  maxPerProject: 100,
  chromeStoreUrl: 'https://clients2.google.com/service/update2/crx',
  chromeStoreTimeoutMs: 30_000,
};

/** Most extensions one browser loads (a create's list, and a running browser's uploads). */
export const MAX_EXTENSIONS_PER_BROWSER = 20;

export function extensionSettingsOf(config: Fields): ExtensionSettings {
  return {
    maxZipBytes: config.BROWSERPLANE_EXTENSION_MAX_ZIP_MB * MIB,
    maxUnpackedBytes: config.BROWSERPLANE_EXTENSION_MAX_UNPACKED_MB * MIB,
    maxEntries: config.BROWSERPLANE_EXTENSION_MAX_ENTRIES,
    maxPerProject: config.BROWSERPLANE_EXTENSION_MAX_PER_PROJECT,
    chromeStoreUrl: config.BROWSERPLANE_CHROME_STORE_URL,
    chromeStoreTimeoutMs: config.BROWSERPLANE_CHROME_STORE_TIMEOUT_MS,
  };
}
