import { describe, expect, it } from 'vitest';
import { parseFsLimits } from '../../agent/src/config.js';
import { LOG_LIMIT_DEFAULTS, parseLogLimits } from '../../agent/src/logs/limits.js';
import { agentFsEnv, ConfigError, configHelp, configSchema, parseConfig } from '../../api/src/config.js';

describe('config', () => {
  it('gives every variable its default on an empty environment', () => {
    const config = parseConfig({}, '/srv/app');
    expect(config).toMatchObject({
      HOST: '127.0.0.1',
      PORT: 8080,
      BROWSERPLANE_DATA_DIR: './.data',
      DATABASE_URL: undefined,
      BROWSERPLANE_API_KEY: undefined,
      LOG_LEVEL: 'info',
    });
    expect(config.dataDir).toBe('/srv/app/.data');
  });

  it('passes the browser file and log limits to the agents, whose defaults are the same', () => {
    const env = agentFsEnv(parseConfig({}));
    expect(env).toEqual({
      AGENT_FS_QUOTA_MB: '1024',
      AGENT_FS_ZIP_MAX_MB: '512',
      AGENT_FS_ZIP_MAX_ENTRIES: '10000',
      AGENT_FS_ZIP_MAX_RATIO: '100',
      AGENT_FS_MAX_DEPTH: '64',
      AGENT_FS_MAX_WALK_ENTRIES: '100000',
      AGENT_LOGS_MAX_STREAMS: '8',
      AGENT_LOGS_LINE_KB: '16',
      AGENT_LOGS_TAIL_LINES: '1000',
      AGENT_LOGS_TAIL_KB: '1024',
      AGENT_LOGS_RING_LINES: '1000',
      AGENT_LOGS_RING_KB: '1024',
    });
    expect(parseFsLimits(env)).toEqual(parseFsLimits({}));
    expect(parseLogLimits(env)).toEqual(LOG_LIMIT_DEFAULTS);
    expect(parseLogLimits(agentFsEnv(parseConfig({ BROWSERPLANE_BROWSER_LOG_STREAMS_MAX: '2' }))).maxStreams).toBe(2);
    expect(() => parseConfig({ BROWSERPLANE_BROWSER_LOG_LINE_KB: '0' })).toThrow(ConfigError);
    expect(parseFsLimits({})).toMatchObject({ quotaBytes: 1024 * 1024 * 1024, maxDepth: 64 });
    expect(agentFsEnv(parseConfig({ BROWSERPLANE_BROWSER_DISK_QUOTA_MB: '0' })).AGENT_FS_QUOTA_MB).toBe('0');
    expect(() => parseConfig({ BROWSERPLANE_BROWSER_FS_MAX_DEPTH: '0' })).toThrow(ConfigError);
    expect(() => parseFsLimits({ AGENT_FS_ZIP_MAX_RATIO: 'lots' })).toThrow(/AGENT_FS_ZIP_MAX_RATIO/);
  });

  it('reads the pool settings: launch concurrency unset by default (the service picks from the cores), memory floor 512 MB', () => {
    expect(parseConfig({})).toMatchObject({ BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: undefined, BROWSERPLANE_POOL_MIN_FREE_MEMORY_MB: 512, BROWSERPLANE_STANDBY_AGENTS: 1 });
    expect(parseConfig({ BROWSERPLANE_STANDBY_AGENTS: '0' }).BROWSERPLANE_STANDBY_AGENTS).toBe(0);
    expect(parseConfig({})).toMatchObject({ BROWSERPLANE_SPARE_BROWSERS: 2, BROWSERPLANE_SPARE_LEARN_MINUTES: 30 });
    expect(parseConfig({ BROWSERPLANE_SPARE_BROWSERS: '0' }).BROWSERPLANE_SPARE_BROWSERS).toBe(0);
    for (const env of [{ BROWSERPLANE_SPARE_BROWSERS: '-1' }, { BROWSERPLANE_SPARE_BROWSERS: 'some' }, { BROWSERPLANE_SPARE_LEARN_MINUTES: '0' }]) {
      expect(() => parseConfig(env)).toThrow(ConfigError);
    }
    expect(() => parseConfig({ BROWSERPLANE_STANDBY_AGENTS: '65' })).toThrow(ConfigError);
    expect(parseConfig({ BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: '4', BROWSERPLANE_POOL_MIN_FREE_MEMORY_MB: '0' })).toMatchObject({
      BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: 4,
      BROWSERPLANE_POOL_MIN_FREE_MEMORY_MB: 0,
    });
    expect(parseConfig({ BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: '' }).BROWSERPLANE_POOL_LAUNCH_CONCURRENCY).toBeUndefined();
    for (const env of [{ BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: '0' }, { BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: 'many' }, { BROWSERPLANE_POOL_MIN_FREE_MEMORY_MB: '-1' }]) {
      expect(() => parseConfig(env)).toThrow(ConfigError);
    }
  });

  it('takes an absolute Chromium path for embedded browsers, and none by default', () => {
    expect(parseConfig({}).BROWSERPLANE_CHROMIUM_PATH).toBeUndefined();
    expect(parseConfig({ BROWSERPLANE_CHROMIUM_PATH: '/opt/chromium/chrome' }).BROWSERPLANE_CHROMIUM_PATH).toBe('/opt/chromium/chrome');
    expect(() => parseConfig({ BROWSERPLANE_CHROMIUM_PATH: 'chromium' })).toThrow(/BROWSERPLANE_CHROMIUM_PATH: must be an absolute path/);
  });

  it('reads the app Job settings of Kubernetes mode: no runner image by default, resources as checked JSON, proxies hidden in errors', () => {
    expect(parseConfig({})).toMatchObject({ BROWSERPLANE_APP_RUNNER_IMAGE: undefined, BROWSERPLANE_APP_RUNNER_PULL_POLICY: 'IfNotPresent', BROWSERPLANE_APP_BUILD_RESOURCES: undefined });
    const parsed = parseConfig({
      BROWSERPLANE_APP_RUNNER_IMAGE: 'registry.example/browserplane/runner:1',
      BROWSERPLANE_APP_RUN_RESOURCES: '{"requests":{"cpu":"100m"},"limits":{"memory":"1Gi"},"workSize":"2Gi"}',
      BROWSERPLANE_APP_CA_CONFIGMAP: 'corp-ca',
    });
    expect(parsed.BROWSERPLANE_APP_RUN_RESOURCES).toEqual({ requests: { cpu: '100m' }, limits: { memory: '1Gi' }, workSize: '2Gi' });
    expect(parsed.BROWSERPLANE_APP_CA_CONFIGMAP).toBe('corp-ca');
    for (const env of [
      { BROWSERPLANE_APP_BUILD_RESOURCES: 'not json' },
      { BROWSERPLANE_APP_BUILD_RESOURCES: '{"limits":{"memory":"lots"},"workSize":"1Gi"}' },
      { BROWSERPLANE_APP_BUILD_RESOURCES: '{"limits":{},"workSize":"1Gi","extra":1}' },
      { BROWSERPLANE_APP_RUNNER_PULL_POLICY: 'Sometimes' },
      { BROWSERPLANE_APP_CA_CONFIGMAP: 'Corp_CA' },
    ]) {
      expect(() => parseConfig(env), JSON.stringify(env)).toThrow(ConfigError);
    }
    expect(parseConfig({ BROWSERPLANE_APP_HTTPS_PROXY: 'http://u:pw@proxy:3128' }).BROWSERPLANE_APP_HTTPS_PROXY).toBe('http://u:pw@proxy:3128');
    // A bad proxy URL is named, its value (maybe a password) is not shown.
    expect(() => parseConfig({ BROWSERPLANE_APP_HTTPS_PROXY: 'socks://u:hunter2@proxy' })).toThrow(/BROWSERPLANE_APP_HTTPS_PROXY: .*\(given \(hidden\)/);
  });

  it('runs browsers locally unless told kubernetes, in the pod’s namespace unless one is named', () => {
    expect(parseConfig({})).toMatchObject({ BROWSERPLANE_RUNTIME: 'local', namespace: 'default', BROWSERPLANE_INTERNAL_URL: undefined });
    expect(parseConfig({ BROWSERPLANE_RUNTIME: 'kubernetes', POD_NAMESPACE: 'browsers' })).toMatchObject({ BROWSERPLANE_RUNTIME: 'kubernetes', namespace: 'browsers' });
    expect(parseConfig({ BROWSERPLANE_NAMESPACE: 'team-a', POD_NAMESPACE: 'browsers' }).namespace).toBe('team-a');
    expect(parseConfig({ BROWSERPLANE_NAMESPACE: '', POD_NAMESPACE: '' }).namespace).toBe('default');
    expect(parseConfig({ BROWSERPLANE_INTERNAL_URL: 'http://browserplane-api.ns.svc:80' }).BROWSERPLANE_INTERNAL_URL).toBe('http://browserplane-api.ns.svc:80');
    for (const env of [
      { BROWSERPLANE_RUNTIME: 'docker' },
      { BROWSERPLANE_RUNTIME: 'Kubernetes' },
      { BROWSERPLANE_NAMESPACE: 'Team_A' },
      { BROWSERPLANE_NAMESPACE: `n${'a'.repeat(63)}` },
      { BROWSERPLANE_INTERNAL_URL: 'ftp://api' },
    ]) {
      expect(() => parseConfig(env), JSON.stringify(env)).toThrow(ConfigError);
    }
  });

  it('treats empty strings of optional settings as unset', () => {
    const config = parseConfig({ DATABASE_URL: '', BROWSERPLANE_API_KEY: '  ' });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.BROWSERPLANE_API_KEY).toBeUndefined();
  });

  it('reports every invalid variable together, with what was expected', () => {
    let error: unknown;
    try {
      parseConfig({ PORT: 'eighty', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://x', BROWSERPLANE_API_KEY: 'short' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(
      ['BROWSERPLANE_API_KEY', 'DATABASE_URL', 'LOG_LEVEL', 'PORT'].sort(),
    );
    expect(problems.find((p) => p.startsWith('PORT'))).toContain('"eighty"');
    expect(problems.find((p) => p.startsWith('PORT'))).toContain('Port the HTTP server listens on');
  });

  it('never echoes a secret it rejects', () => {
    const secret = 'not-long-enough-secret';
    let message = '';
    try {
      parseConfig({ BROWSERPLANE_API_KEY: secret, DATABASE_URL: 'ftp://user:hunter2@host/db' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('BROWSERPLANE_API_KEY');
    expect(message).not.toContain(secret);
    expect(message).not.toContain('hunter2');
  });

  it('accepts a postgres URL and a long bootstrap key', () => {
    const key = 'k'.repeat(40);
    const config = parseConfig({ DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/db', BROWSERPLANE_API_KEY: key, PORT: '0' });
    expect(config.DATABASE_URL).toBe('postgres://u:p@127.0.0.1:5432/db');
    expect(config.BROWSERPLANE_API_KEY).toBe(key);
    expect(config.PORT).toBe(0);
  });

  it('--help lists every variable with its default', () => {
    const help = configHelp();
    for (const name of Object.keys(configSchema.shape)) expect(help).toContain(name);
    expect(help).toMatch(/PORT\s+default: 8080/);
    expect(help).toMatch(/DATABASE_URL\s+default: \(unset\)/);
  });
});
