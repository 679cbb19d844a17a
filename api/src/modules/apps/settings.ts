import path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Config } from '../../config.js';
import type { AppJobOptions } from './app-jobs.js';

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
  /**
   * Kubernetes mode: builds and runs are Jobs of the runner image (kube-jobs.ts), sources
   * and bundles live in Postgres. Unset: embedded mode (the build queue, the app sandbox).
   */
  kubernetes?: { kubeConfig: KubeConfig; jobs: Omit<AppJobOptions, 'apiUrl'> } | undefined;
}

const MIB = 1024 * 1024;

export function appsSettingsOf(config: Config, kubernetes?: { kubeConfig: KubeConfig; namespace: string }): AppsSettings {
  return {
    ...(kubernetes && config.BROWSERPLANE_APP_RUNNER_IMAGE
      ? {
          kubernetes: {
            kubeConfig: kubernetes.kubeConfig,
            jobs: {
              namespace: kubernetes.namespace,
              image: config.BROWSERPLANE_APP_RUNNER_IMAGE,
              imagePullPolicy: config.BROWSERPLANE_APP_RUNNER_PULL_POLICY,
              proxy: { http: config.BROWSERPLANE_APP_HTTP_PROXY, https: config.BROWSERPLANE_APP_HTTPS_PROXY, noProxy: config.BROWSERPLANE_APP_NO_PROXY },
              caConfigMap: config.BROWSERPLANE_APP_CA_CONFIGMAP,
              ...(config.BROWSERPLANE_APP_POD_PLACEMENT ?? {}),
              resources: {
                ...(config.BROWSERPLANE_APP_BUILD_RESOURCES ? { build: config.BROWSERPLANE_APP_BUILD_RESOURCES } : {}),
                ...(config.BROWSERPLANE_APP_RUN_RESOURCES ? { run: config.BROWSERPLANE_APP_RUN_RESOURCES } : {}),
              },
            },
          },
        }
      : {}),
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
