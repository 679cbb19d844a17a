import os from 'node:os';
import { z } from 'zod';
import { browserFsLimitFields } from '../../api/src/index.js';
import { decodeKey } from '../../api/src/index.js';
import { describeVariables } from '../../api/src/index.js';
import { jsonOf, podPlacementFields } from '../../contract/placement.js';

/**
 * Every setting the operator reads, as one zod schema over the environment; parsed once in
 * main. The names are the ones the Helm chart's operator Deployment sets
 * (charts/browserplane/templates/operator-deployment.yaml). The operator does not need
 * Postgres for sessions the API writes, so DATABASE_URL is not read here.
 */

export class OperatorConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid operator configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'OperatorConfigError';
  }
}

const seconds = z.coerce.number().positive().max(3600);

/** What the chart puts in BROWSERPLANE_BROWSER_POD (its $browserPod dict). */
const browserPodSchema = z.object({
  image: z.string().min(1).describe('The browser image (agent + Chromium)'),
  imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).optional(),
  resources: z
    .object({ requests: z.record(z.string(), z.string()).optional(), limits: z.record(z.string(), z.string()).optional() })
    .nullish()
    .transform((value) => value ?? undefined),
  ...podPlacementFields,
});
export type BrowserPodSettings = z.infer<typeof browserPodSchema>;

export const operatorConfigSchema = z
  .object({
    POD_NAME: z.string().min(1).default(os.hostname()).describe('This replica’s identity in the leader election Lease'),
    POD_NAMESPACE: z.string().min(1).default('default').describe('Namespace of the Lease, the BrowserSessions and the browser pods'),
    BROWSERPLANE_OPERATOR_LEASE: z.string().min(1).default('browserplane-operator').describe('Name of the leader election Lease'),
    BROWSERPLANE_LEASE_DURATION_SECONDS: seconds.default(15).describe('How long a Lease holds without renewal before another replica may take over'),
    BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS: seconds.default(10).describe('The leader stops acting when it could not renew for this long'),
    BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS: seconds.default(2).describe('How often the leader renews and candidates retry'),
    BROWSERPLANE_OPERATOR_HEALTH_HOST: z.string().min(1).default('0.0.0.0').describe('Address of /healthz and /readyz'),
    BROWSERPLANE_OPERATOR_HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(8081).describe('Port of /healthz and /readyz (0 picks a free one)'),
    BROWSERPLANE_BROWSER_POD: jsonOf(browserPodSchema).describe('JSON: what every browser pod gets (image, pull policy, resources, …)'),
    BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(120_000).describe('How long a browser pod may take to become Ready (image pull included)'),
    // The browser file API's limits, passed to every browser pod as AGENT_FS_* (the API's own settings).
    ...browserFsLimitFields,
    BROWSERPLANE_BROWSER_TERMINATE_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000).describe('How long a deleted session’s browser gets to close before its pod is killed'),
    BROWSERPLANE_OPERATOR_WORKERS: z.coerce.number().int().min(1).max(64).default(4).describe('Reconciles run at once per controller'),
    BROWSERPLANE_OPERATOR_RESYNC_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300).describe('How often every resource is reconciled again even without a change'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    BROWSERPLANE_ENCRYPTION_KEY: z
      .string({ error: 'required: the key the API seals secrets with (the chart passes the same one); browser agent tokens derive from it' })
      .transform((text, context): Buffer => {
        const key = decodeKey(text);
        if (key) return key;
        context.addIssue({ code: 'custom', message: 'must be 32 bytes in base64 or hex' });
        return z.NEVER;
      })
      .describe('32 bytes, base64 or hex: the API’s encryption key, from which each browser’s agent token derives'),
  })
  .refine(
    (c) => c.BROWSERPLANE_LEASE_DURATION_SECONDS > c.BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS && c.BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS > c.BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS,
    { message: 'leader election needs lease duration > renew deadline > retry period', path: ['BROWSERPLANE_LEASE_DURATION_SECONDS'] },
  );

export type OperatorConfig = z.infer<typeof operatorConfigSchema>;

export function parseOperatorConfig(env: NodeJS.ProcessEnv): OperatorConfig {
  const result = operatorConfigSchema.safeParse(env);
  if (result.success) return result.data;
  // Values are not echoed: BROWSERPLANE_BROWSER_POD is harmless, but a habit of not
  // printing the environment is cheaper than remembering which variable is.
  throw new OperatorConfigError(result.error.issues.map((issue) => `${issue.path.join('.') || '(environment)'}: ${issue.message}`));
}

/** The text the operator's `--help` prints: every variable with its default and meaning. */
export function operatorHelp(): string {
  return [
    'Usage: browserplane-operator [--help | --version]',
    '',
    'Runs the Browserplane operator (leader-elected controllers). Configuration comes from the environment:',
    '',
    ...describeVariables(operatorConfigSchema),
  ].join('\n');
}
