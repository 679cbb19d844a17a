import { describe, expect, it } from 'vitest';
import { OperatorConfigError, parseOperatorConfig } from '../../operator/src/config.js';

// The operator's settings as the chart sets them (operator-deployment.yaml): good values
// parse with their defaults, bad ones fail with every problem named and no value echoed.

const pod = (extra: Record<string, unknown> = {}) => JSON.stringify({ image: 'registry.example.com/browser:1', ...extra });

/** The chart passes the API's encryption key to the operator too (agent tokens derive from it). */
const KEY = { BROWSERPLANE_ENCRYPTION_KEY: Buffer.alloc(32, 9).toString('base64') };

function problemsOf(env: Record<string, string>, key: Record<string, string> = KEY): string[] {
  try {
    parseOperatorConfig({ ...key, ...env });
  } catch (error) {
    if (error instanceof OperatorConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected the configuration to be refused');
}

describe('operator configuration', () => {
  it('parses the chart’s settings and fills the defaults', () => {
    const config = parseOperatorConfig({ ...KEY, POD_NAME: 'op-1', POD_NAMESPACE: 'bp', BROWSERPLANE_BROWSER_POD: pod({ tolerations: [{ key: 'browsers', operator: 'Exists', effect: 'NoSchedule' }] }) });
    expect(config).toMatchObject({
      POD_NAME: 'op-1',
      POD_NAMESPACE: 'bp',
      BROWSERPLANE_OPERATOR_LEASE: 'browserplane-operator',
      BROWSERPLANE_LEASE_DURATION_SECONDS: 15,
      BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS: 10,
      BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS: 2,
      BROWSERPLANE_OPERATOR_HEALTH_PORT: 8081,
      BROWSERPLANE_OPERATOR_WORKERS: 4,
    });
    expect(config.BROWSERPLANE_BROWSER_POD.tolerations).toEqual([{ key: 'browsers', operator: 'Exists', effect: 'NoSchedule' }]);
  });

  it('refuses a browser pod setting that is not JSON, lacks the image, or has a misspelt toleration', () => {
    expect(problemsOf({ BROWSERPLANE_BROWSER_POD: '{image:' })).toEqual(['BROWSERPLANE_BROWSER_POD: not JSON']);
    expect(problemsOf({ BROWSERPLANE_BROWSER_POD: '{}' })[0]).toMatch(/^BROWSERPLANE_BROWSER_POD: image: /);
    expect(problemsOf({ BROWSERPLANE_BROWSER_POD: pod({ tolerations: [{ key: 'browsers', efect: 'NoSchedule' }] }) })[0]).toMatch(/tolerations\.0: .*efect/);
    expect(problemsOf({ BROWSERPLANE_BROWSER_POD: pod({ tolerations: [{ operator: 'Maybe' }] }) })[0]).toMatch(/tolerations\.0\.operator/);
  });

  it('needs the API’s encryption key, 32 bytes, and echoes no part of a bad one', () => {
    expect(problemsOf({ BROWSERPLANE_BROWSER_POD: pod() }, {})[0]).toMatch(/^BROWSERPLANE_ENCRYPTION_KEY: required/);
    const problems = problemsOf({ BROWSERPLANE_BROWSER_POD: pod() }, { BROWSERPLANE_ENCRYPTION_KEY: 'c2hvcnQtc2VjcmV0' });
    expect(problems).toEqual(['BROWSERPLANE_ENCRYPTION_KEY: must be 32 bytes in base64 or hex']);
    expect(parseOperatorConfig({ ...KEY, BROWSERPLANE_BROWSER_POD: pod() }).BROWSERPLANE_ENCRYPTION_KEY).toEqual(Buffer.alloc(32, 9));
  });

  it('refuses leader election timings where a leader could act after its lease expired', () => {
    const problems = problemsOf({ BROWSERPLANE_BROWSER_POD: pod(), BROWSERPLANE_LEASE_DURATION_SECONDS: '5', BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS: '10' });
    expect(problems).toEqual(['BROWSERPLANE_LEASE_DURATION_SECONDS: leader election needs lease duration > renew deadline > retry period']);
  });

  it('names every bad setting at once and echoes none of their values', () => {
    const problems = problemsOf({ BROWSERPLANE_BROWSER_POD: pod(), BROWSERPLANE_OPERATOR_WORKERS: '0', BROWSERPLANE_OPERATOR_HEALTH_PORT: 'secret-looking-value', LOG_LEVEL: 'loud' });
    expect(problems.map((problem) => problem.split(':')[0])).toEqual(['BROWSERPLANE_OPERATOR_HEALTH_PORT', 'BROWSERPLANE_OPERATOR_WORKERS', 'LOG_LEVEL']);
    expect(problems.join('\n')).not.toContain('secret-looking-value');
  });
});
