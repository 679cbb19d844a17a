import { z } from 'zod';
import { jsonSetting, podPlacementFields } from '../../contract/placement.js';

/**
 * Settings of the app runtime in Kubernetes mode (docs/apps.md, "Kubernetes mode"): the
 * runner image the build and run Jobs use, their egress and CA bundle, their resources.
 * Spread into config.ts's schema.
 */
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

const proxyUrl = optionalString.pipe(z.string().regex(/^https?:\/\/[^\s]+$/, 'an http:// or https:// URL').optional());

const quantity = z.string().regex(/^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$/, 'a Kubernetes quantity (500m, 2, 512Mi, 4Gi)');
const resourcesJson = jsonSetting(
  z
    .object({
      requests: z.record(z.string(), quantity).default({}),
      limits: z.record(z.string(), quantity).default({}),
      workSize: quantity,
    })
    .strict(),
);

/** Where app pods go (the chart: its imagePullSecrets and apps.nodeSelector, .tolerations, .runtimeClassName). */
const placementJson = jsonSetting(z.object(podPlacementFields).strict());

export const appJobFields = {
  BROWSERPLANE_APP_RUNNER_IMAGE: optionalString.describe(
    'Kubernetes mode: the runner image of build and run Jobs (make images builds browserplane/runner); unset, POST /deployments answers 503 apps_unavailable',
  ),
  BROWSERPLANE_APP_RUNNER_PULL_POLICY: z.enum(['Always', 'IfNotPresent', 'Never']).default('IfNotPresent').describe('Kubernetes mode: imagePullPolicy of the runner image'),
  BROWSERPLANE_APP_HTTP_PROXY: proxyUrl.describe('Kubernetes mode: HTTP_PROXY of build and run pods (npm, pip and the app reach the internet through it)'),
  BROWSERPLANE_APP_HTTPS_PROXY: proxyUrl.describe('Kubernetes mode: HTTPS_PROXY of build and run pods'),
  BROWSERPLANE_APP_NO_PROXY: optionalString.describe('Kubernetes mode: NO_PROXY of build and run pods (the API\'s own host is always added)'),
  BROWSERPLANE_APP_CA_CONFIGMAP: optionalString
    .pipe(z.string().max(253).regex(/^[a-z0-9]([-.a-z0-9]*[a-z0-9])?$/, 'a ConfigMap name').optional())
    .describe('Kubernetes mode: a ConfigMap (key ca.crt, a whole CA bundle) the build and run pods trust instead of their own (egress that inspects TLS)'),
  BROWSERPLANE_APP_BUILD_RESOURCES: resourcesJson.describe('Kubernetes mode: JSON {requests, limits, workSize} of build pods (default: docs/apps.md)'),
  BROWSERPLANE_APP_RUN_RESOURCES: resourcesJson.describe('Kubernetes mode: JSON {requests, limits, workSize} of run pods (default: docs/apps.md)'),
  BROWSERPLANE_APP_POD_PLACEMENT: placementJson.describe('Kubernetes mode: JSON {imagePullSecrets, nodeSelector, tolerations, runtimeClassName} of build and run pods (default: none)'),
};
