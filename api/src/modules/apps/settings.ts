import path from 'node:path';
import type { Config } from '../../config.js';

/**
 * What the app runtime needs from the service's configuration: where apps live on disk
 * and the bounds of a deployment. Unset in AppSettings (test apps that do not deploy),
 * the deployment routes answer 503 apps_unavailable.
 */
export interface AppsSettings {
  /** The service's data dir; sources and builds live under `<dataDir>/apps/` (paths.ts). */
  dataDir: string;
  maxUploadBytes: number;
  maxUnpackedBytes: number;
  maxFiles: number;
  buildTimeoutMs: number;
  /** Local git repositories (a path, file://) may be deployed from. */
  gitAllowLocal: boolean;
}

const MIB = 1024 * 1024;

export function appsSettingsOf(config: Config): AppsSettings {
  return {
    dataDir: config.dataDir,
    maxUploadBytes: config.BROWSERPLANE_APP_MAX_UPLOAD_MB * MIB,
    maxUnpackedBytes: config.BROWSERPLANE_APP_MAX_UNPACKED_MB * MIB,
    maxFiles: config.BROWSERPLANE_APP_MAX_FILES,
    buildTimeoutMs: config.BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS * 1000,
    gitAllowLocal: config.BROWSERPLANE_APP_GIT_ALLOW_LOCAL,
  };
}

/** The shared layout (docs/apps.md): content-addressed sources, one build dir per deployment. */
export const appsDir = (dataDir: string) => path.join(dataDir, 'apps');
export const sourcesDir = (dataDir: string) => path.join(appsDir(dataDir), 'sources');
export const sourcePath = (dataDir: string, checksum: string) => path.join(sourcesDir(dataDir), checksum);
export const buildDirOf = (dataDir: string, deploymentId: string) => path.join(appsDir(dataDir), 'builds', deploymentId);
/** Root-only space of the service: spooled uploads and git checkouts before they enter the store. */
export const spoolDir = (dataDir: string) => path.join(appsDir(dataDir), 'spool');
