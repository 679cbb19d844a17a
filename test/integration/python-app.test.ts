import { mkdtempSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BuildError } from '../../api/src/modules/apps/build.js';
import { installPythonDependencies } from '../../api/src/modules/apps/python-build.js';
import { inspectApps, runAction, type RunnerOptions } from '../../api/src/modules/apps/runner.js';

/**
 * A Python app's build (a venv, pip from PyPI in the sandbox) and its runner (runner.py
 * under the venv's python in the sandbox) with the real `kernel` package. Needs dist
 * (runner-child.js) and root (the sandbox's uid switch), as app-runner.test.ts does.
 */

const APP = `
import asyncio, os
import kernel
from helpers import shout

app = kernel.App("py-demo")

@app.action("echo")
def echo(ctx, payload):
    return {"invocation": ctx.invocation_id, "payload": payload}

@app.action("ctx-only")
async def ctx_only(ctx):
    await asyncio.sleep(0.01)
    return shout(ctx.invocation_id)

@app.action("fail")
async def fail(ctx, payload):
    print("about to fail")
    raise ValueError("the python action broke on purpose")

@app.action("not-json")
def not_json(ctx, payload):
    return {1, 2}

@app.action("read")
def read(ctx, payload):
    with open(payload["path"]) as f:
        return f.read()

@app.action("hang")
def hang(ctx, payload):
    import time
    time.sleep(120)

@app.action("write")
def write(ctx, payload):
    with open(payload["path"], "w") as f:
        f.write("planted")
    return "written"
`;

let dataDir: string;
let app: RunnerOptions;

async function buildDir(id: string, files: Record<string, string>): Promise<string> {
  const dir = path.join(dataDir, 'apps', 'builds', id);
  await mkdir(dir, { recursive: true, mode: 0o755 });
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text, { mode: 0o644 });
  return dir;
}

const install = (dir: string, lines: string[] = []) =>
  installPythonDependencies(dir, { dataDir, signal: new AbortController().signal, onLog: (_s, line) => lines.push(line), timeoutMs: () => 240_000 });

const invoke = (actionName: string, extra: Partial<Parameters<typeof runAction>[0]> = {}) =>
  runAction({ ...app, appName: 'py-demo', actionName, payload: null, invocationId: 'inv_py', ...extra });

describe.skipIf(process.getuid?.() !== 0)('a Python app', () => {
  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'bp-python-app-'));
    await chmod(dataDir, 0o711);
    // Kernel's template shape: pyproject.toml with [project].dependencies, no [build-system].
    const dir = await buildDir('dep_py', {
      'main.py': APP,
      'helpers.py': 'def shout(text):\n    return text.upper()\n',
      'pyproject.toml': '[project]\nname = "py-demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["kernel==0.131.0"]\n',
    });
    const lines: string[] = [];
    await install(dir, lines);
    expect(lines).toContain('pyproject.toml: kernel==0.131.0');
    app = { buildDir: dir, entry: 'main.py', runtime: 'python', env: { KERNEL_API_KEY: 'unused' }, timeoutMs: 30_000, dataDir };
  }, 300_000);
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('reads the apps and actions the entry registers', async () => {
    expect(await inspectApps(app)).toEqual({ apps: [{ name: 'py-demo', actions: ['echo', 'ctx-only', 'fail', 'not-json', 'read', 'hang', 'write'].map((name) => ({ name })) }] });
  });

  it('runs sync and async actions with the payload positional (None when absent) and the context', async () => {
    expect(await invoke('echo', { payload: '{"n":1}' })).toEqual({ ok: true, output: JSON.stringify({ invocation: 'inv_py', payload: { n: 1 } }) });
    expect(await invoke('echo')).toEqual({ ok: true, output: '{"invocation":"inv_py","payload":null}' });
    expect(await invoke('ctx-only')).toEqual({ ok: true, output: '"INV_PY"' });
  });

  it('fails an action that raises with its message (its traceback in the log), and one whose result is not JSON', async () => {
    const lines: string[] = [];
    expect(await invoke('fail', { onLog: (_s, line) => lines.push(line) })).toEqual({ ok: false, error: 'the python action broke on purpose' });
    expect(lines).toContain('about to fail');
    expect(lines.join('\n')).toMatch(/main\.py", line \d+, in fail/);
    expect(await invoke('not-json')).toMatchObject({ ok: false, error: expect.stringMatching(/^the action's return value is not JSON: .*set/) as string });
    expect(await invoke('echo', { payload: '"h\u00e9"' })).toEqual({ ok: true, output: '{"invocation":"inv_py","payload":"hé"}' });
    expect(await invoke('missing')).toEqual({ ok: false, error: 'app "py-demo" has no action named "missing"' });
  });

  it('ends an action at its timeout', async () => {
    const started = Date.now();
    expect(await invoke('hang', { timeoutMs: 1500 })).toEqual({ ok: false, error: 'timed out after 2s' });
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it('cannot read the data dir beside its build, nor write its own build', async () => {
    const secret = path.join(dataDir, 'secret.txt');
    await writeFile(secret, 'the key', { mode: 0o644 });
    const read = await invoke('read', { payload: JSON.stringify({ path: secret }) });
    expect(read).toMatchObject({ ok: false, error: expect.stringMatching(/No such file or directory/) as string });
    // The build's own file is readable: the failure above is the sandbox's, not the action's.
    expect(await invoke('read', { payload: JSON.stringify({ path: path.join(app.buildDir, 'helpers.py') }) })).toMatchObject({ ok: true });
    // Nor change its code or its venv for the next run.
    for (const target of ['helpers.py', '.browserplane/venv/bin/python']) {
      expect(await invoke('write', { payload: JSON.stringify({ path: path.join(app.buildDir, target) }) })).toMatchObject({ ok: false, error: expect.stringMatching(/Read-only file system/) as string });
    }
  });

  it('fails the build of a dependency that does not exist, naming pip', async () => {
    const dir = await buildDir('dep_py_bad', { 'main.py': APP, 'pyproject.toml': '[project]\nname = "x"\nversion = "0"\ndependencies = ["kernel==0.131.0", "browserplane-no-such-package-xyz==1.0"]\n' });
    const lines: string[] = [];
    const error = await install(dir, lines).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BuildError);
    expect((error as Error).message).toMatch(/^pip install failed \(exit 1\): a dependency could not be installed/);
    expect(lines.join('\n')).toMatch(/browserplane-no-such-package-xyz/);
  }, 300_000);

  it('replaces a venv the source carries, and makes none through a link out of the build dir', async () => {
    // A planted interpreter would run in place of the venv's python.
    const planted = await buildDir('dep_py_planted', { 'main.py': APP, 'helpers.py': 'def shout(text):\n    return text.upper()\n', 'requirements.txt': 'kernel==0.131.0\n' });
    await mkdir(path.join(planted, '.browserplane', 'venv', 'bin'), { recursive: true });
    await writeFile(path.join(planted, '.browserplane', 'venv', 'bin', 'python'), '#!/bin/sh\necho planted >&3\n', { mode: 0o755 });
    await install(planted);
    expect(await inspectApps({ ...app, buildDir: planted })).toMatchObject({ apps: [{ name: 'py-demo' }] });
    // A git tree keeps links: .browserplane -> a dir of the host. Root must not clear or fill it.
    const outside = path.join(dataDir, 'outside');
    await mkdir(path.join(outside, 'venv'), { recursive: true });
    await writeFile(path.join(outside, 'venv', 'keep.txt'), 'host file');
    const linked = await buildDir('dep_py_link', { 'main.py': APP });
    await symlink(outside, path.join(linked, '.browserplane'));
    await expect(install(linked)).rejects.toThrow(/python3 -m venv failed/);
    expect(await readFile(path.join(outside, 'venv', 'keep.txt'), 'utf8')).toBe('host file');
    expect(await readdir(path.join(outside, 'venv'))).toEqual(['keep.txt']);
  }, 300_000);

  it('refuses a pyproject.toml that is not TOML, or whose dependencies smuggle pip options', async () => {
    const broken = await buildDir('dep_py_toml', { 'main.py': APP, 'pyproject.toml': '[project\n' });
    await expect(install(broken)).rejects.toThrow(/^pyproject.toml cannot be read: /);
    const option = await buildDir('dep_py_opt', { 'main.py': APP, 'pyproject.toml': '[project]\ndependencies = ["--index-url=http://evil.example/"]\n' });
    await expect(install(option)).rejects.toThrow(/is not a requirement/);
  }, 120_000);
});
