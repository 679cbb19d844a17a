import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { AuthenticationError, PermissionDeniedError } from '@onkernel/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { configSchema } from '../../api/src/config.js';
import { unique } from './support/sdk.js';
import { cleanupServices, collect, createDataDir, OPERATOR_MAIN_JS, runMain, startService, type RunningService } from '../support/service.js';

const messages = (service: RunningService) => service.logs().map((line) => line.msg);

afterEach(cleanupServices);

describe('first start', () => {
  it('generates an admin key, prints it once and writes it to the data dir with mode 600', async () => {
    const service = await startService();

    const printed = service.printedKey();
    expect(printed).toMatch(/^bp_[A-Za-z0-9_-]{40,}$/);
    const file = path.join(service.dataDir, 'admin-api-key');
    expect((await readFile(file, 'utf8')).trim()).toBe(printed);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(service.stdout.filter((line) => line.includes(printed!))).toHaveLength(1);
    expect(service.logs().some((line) => JSON.stringify(line).includes(printed!))).toBe(false);

    const projects = await collect(service.client(printed).projects.list());
    expect(projects).toEqual([expect.objectContaining({ name: 'default', status: 'active' })]);
  });

  it('accepts BROWSERPLANE_API_KEY as the admin key without printing or writing a key', async () => {
    const configured = `e2e-configured-${randomBytes(24).toString('hex')}`;
    const service = await startService({ env: { BROWSERPLANE_API_KEY: configured } });

    expect(service.printedKey()).toBeUndefined();
    expect(service.stdout.join('\n')).not.toContain(configured);
    expect(existsSync(path.join(service.dataDir, 'admin-api-key'))).toBe(false);

    const admin = service.client(configured);
    await expect(admin.organization.limits.retrieve()).resolves.toMatchObject({ max_concurrent_sessions: 100 });
    const created = await admin.apiKeys.create({ name: unique('made-by-configured') });
    expect(created.project_id).toBeNull();
    await rejection401(service.client(`${configured}x`).organization.limits.retrieve());
  });
});

describe('restart on the same data dir', () => {
  it('keeps projects, keys and limits, keeps accepting the first admin key and prints no new key', async () => {
    const first = await startService();
    const admin = first.client();
    const project = await admin.projects.create({ name: unique('survivor') });
    const orgKey = await admin.apiKeys.create({ name: unique('org-key') });
    const scopedKey = await admin.apiKeys.create({ name: unique('scoped-key'), project_id: project.id });
    await admin.organization.limits.update({ default_project_max_concurrent_sessions: 7 });
    expect((await first.stop()).code).toBe(0);

    const second = await startService({ dataDir: first.dataDir });
    expect(second.printedKey()).toBeUndefined();
    expect(second.adminKey).toBe(first.adminKey);
    expect(messages(second)).not.toContain('created organisation and default project');

    const again = second.client(first.adminKey);
    await expect(again.projects.retrieve(project.id)).resolves.toMatchObject({ id: project.id, name: project.name });
    await expect(again.apiKeys.retrieve(scopedKey.id)).resolves.toMatchObject({ project_id: project.id, project_name: project.name });
    await expect(again.organization.limits.retrieve()).resolves.toMatchObject({ default_project_max_concurrent_sessions: 7 });
    const projectNames = (await collect(again.projects.list())).map((p) => p.name);
    expect(projectNames.filter((name) => name === 'default')).toHaveLength(1);
    // Keys made before the restart authenticate: the org key fully, the scoped key up to its scope check.
    await expect(second.client(orgKey.key).projects.retrieve(project.id)).resolves.toMatchObject({ id: project.id });
    await expect(second.client(scopedKey.key).projects.list()).rejects.toBeInstanceOf(PermissionDeniedError);
  });

  it('adds BROWSERPLANE_API_KEY on a later start and keeps the generated key working', async () => {
    const first = await startService();
    await first.stop();
    const configured = `e2e-later-${randomBytes(24).toString('hex')}`;

    const second = await startService({ dataDir: first.dataDir, env: { BROWSERPLANE_API_KEY: configured } });

    expect(second.printedKey()).toBeUndefined();
    await expect(second.client(configured).organization.limits.retrieve()).resolves.toBeDefined();
    await expect(second.client(first.adminKey).organization.limits.retrieve()).resolves.toBeDefined();
  });
});

describe('a data dir in use', () => {
  it('refuses a second service on it and leaves the first one working', async () => {
    const first = await startService();

    const second = await startService({ dataDir: first.dataDir }).then(
      () => undefined,
      (error: unknown) => error,
    );

    expect(second).toBeInstanceOf(Error);
    expect(String(second)).toContain(`Another Browserplane process (pid ${first.pid}) is using the data dir`);
    await expect(first.client().organization.limits.retrieve()).resolves.toBeDefined();
    expect((await first.stop()).code).toBe(0);
    // Once the first has stopped, the data dir is free again.
    const third = await startService({ dataDir: first.dataDir });
    await expect(third.client(first.adminKey).organization.limits.retrieve()).resolves.toBeDefined();
  });
});

describe('command line', () => {
  it('--help prints every configuration variable with its default and exits 0', async () => {
    const result = await runMain(['--help']);

    expect(result.code).toBe(0);
    const defaults = configSchema.parse({});
    const names = Object.keys(configSchema.shape) as (keyof typeof defaults)[];
    expect(names.length).toBeGreaterThan(5);
    for (const name of names) {
      const value = defaults[name];
      const shown = value === undefined ? '(unset)' : typeof value === 'object' ? JSON.stringify(value) : String(value);
      const line = result.stdout.split('\n').find((l) => l.trim().startsWith(`${name} `));
      expect(line, name).toBeDefined();
      expect(line!.trimEnd().endsWith(`default: ${shown}`), `${name}: ${line}`).toBe(true);
    }
  });

  it.each([
    ['API', undefined],
    ['operator', OPERATOR_MAIN_JS],
  ])('the %s prints package.json\'s version with --version and exits 0', async (_name, entry) => {
    const { version } = JSON.parse(await readFile(path.join(import.meta.dirname, '../../package.json'), 'utf8')) as { version: string };

    const result = await runMain(['--version'], {}, entry);

    expect(result.code).toBe(0);
    expect(result.stdout).toBe(`${version}\n`);
  });

  it.each([
    ['API', undefined, /^Usage: browserplane \[/m],
    ['operator', OPERATOR_MAIN_JS, /^Usage: browserplane-operator \[/m],
  ])('the %s refuses an unknown flag with exit 2, a line naming it and the usage, and starts nothing', async (_name, entry, usage) => {
    const parent = await createDataDir();
    const dataDir = path.join(parent, 'never-created');

    const result = await runMain(['--prot=9000'], { BROWSERPLANE_DATA_DIR: dataDir }, entry);

    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toContain('unknown option "--prot=9000"');
    expect(result.stderr).toMatch(usage);
    expect(result.stdout).toBe('');
    expect(existsSync(dataDir)).toBe(false);
  });

  it('reports every invalid variable together and exits 2 without starting anything', async () => {
    const parent = await createDataDir();
    const dataDir = path.join(parent, 'never-created');

    const result = await runMain([], { PORT: 'abc', LOG_LEVEL: 'loud', BROWSERPLANE_DATA_DIR: dataDir });

    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^\s*- PORT: /m);
    expect(result.stderr).toMatch(/^\s*- LOG_LEVEL: /m);
    expect(result.stderr).not.toMatch(/\bat .*\.js:\d+/); // a message, not a stack trace
    expect(result.stdout).toBe('');
    expect(existsSync(dataDir)).toBe(false);
  });

  it.runIf(process.getuid?.() === 0)('as root with a data dir the Postgres user cannot enter (a checkout under /root) says what to run, without a stack trace', async () => {
    const parent = await createDataDir();
    await chmod(parent, 0o700); // as /root is
    const dataDir = path.join(parent, 'checkout', '.data');

    const result = await runMain([], { BROWSERPLANE_DATA_DIR: dataDir });

    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(new RegExp(`^browserplane cannot start: The embedded Postgres runs as user "\\w+", which cannot enter ${parent}`));
    expect(result.stderr).toContain('BROWSERPLANE_DATA_DIR=/var/lib/browserplane make run');
    expect(result.stderr).not.toMatch(/\bat .*\.js:\d+/);
  });

  it('does not echo an invalid BROWSERPLANE_API_KEY in its error', async () => {
    const secret = 'short secret value';
    const result = await runMain([], { BROWSERPLANE_API_KEY: secret, BROWSERPLANE_DATA_DIR: await createDataDir() });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('BROWSERPLANE_API_KEY');
    expect(result.stderr).not.toContain(secret);
  });
});

async function rejection401(call: Promise<unknown>): Promise<void> {
  await expect(call).rejects.toBeInstanceOf(AuthenticationError);
}
