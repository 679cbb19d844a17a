import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clearScratch, runSandboxed, SANDBOX_LIMITS, type SandboxRunOptions } from '../../api/src/modules/apps/sandbox.js';

/**
 * The app sandbox against real attacks: each is first shown to work on the host as an
 * unprivileged uid without the sandbox (where it makes sense), so what stops it inside is
 * the sandbox and not the file modes.
 */

let dataDir: string;
let build: string;
let out: string;

function sh(script: string, extra: Partial<SandboxRunOptions> = {}): Promise<{ code: number | null; timedOut: boolean; lines: string[] }> {
  const lines: string[] = [];
  return runSandboxed({
    command: '/bin/sh',
    args: ['-c', script],
    cwd: build,
    writable: [out],
    readable: [build],
    env: {},
    timeoutMs: 20_000,
    network: true,
    dataDir,
    onLog: (stream, line) => lines.push(`${stream}: ${line}`),
    ...extra,
  }).then((result) => ({ code: result.code, timedOut: result.timedOut, lines }));
}

/** The same script on the host as an unprivileged uid, no sandbox: the control. */
function unconfined(script: string): number | null {
  return spawnSync('setpriv', ['--reuid=1299999', '--regid=1299999', '--clear-groups', '--', '/bin/sh', '-c', script]).status;
}

describe.skipIf(process.getuid?.() !== 0)('app sandbox', () => {
  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'bp-app-sandbox-'));
    await chmod(dataDir, 0o711);
    // A data dir secret left world-readable by mistake: only the sandbox keeps it from the code.
    await writeFile(path.join(dataDir, 'postgres-password'), 'hunter2\n', { mode: 0o644 });
    build = path.join(dataDir, 'apps', 'builds', 'dep_1');
    out = path.join(dataDir, 'apps', 'builds', 'dep_2');
    await mkdir(build, { recursive: true, mode: 0o755 });
    await mkdir(out, { recursive: true, mode: 0o755 });
    await chmod(path.join(dataDir, 'apps'), 0o755);
    await chmod(path.join(dataDir, 'apps', 'builds'), 0o755);
    await writeFile(path.join(build, 'index.js'), 'export {}\n', { mode: 0o644 });
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('runs as an unprivileged uid of its own, in its cwd, with node on the PATH', async () => {
    const result = await sh('id -u; pwd; node -e "console.log(process.version)"');
    expect(result.code).toBe(0);
    const uid = Number(result.lines[0]!.replace('stdout: ', ''));
    expect(uid).toBeGreaterThanOrEqual(1_300_000);
    expect(result.lines[1]).toBe(`stdout: ${build}`);
    expect(result.lines[2]).toBe(`stdout: ${process.version}`);
  });

  it('cannot read the data dir', async () => {
    const secret = path.join(dataDir, 'postgres-password');
    expect(unconfined(`cat ${secret}`)).toBe(0);
    const result = await sh(`cat ${secret} || echo refused; ls -A ${dataDir}`);
    expect(result.lines.join('\n')).not.toContain('hunter2');
    expect(result.lines).toContain('stdout: refused');
    // What the data dir shows inside is the path to the bound dirs, nothing else.
    expect(result.lines.filter((line) => line.startsWith('stdout:'))).toEqual(['stdout: refused', 'stdout: apps']);
  });

  it('cannot write outside its writable dirs, and the writable ones go back to root after', async () => {
    expect(unconfined(`touch ${build}/planted`)).not.toBe(0); // build is root's 0755: the control for the ro bind is a chmod
    await chmod(build, 0o777);
    try {
      expect(unconfined(`touch ${build}/planted && rm ${build}/planted`)).toBe(0);
      const result = await sh(`touch ${build}/planted; touch /usr/planted; touch /etc/planted; touch /planted; echo ok > ${out}/made; echo done`);
      expect(result.lines.filter((line) => line.includes('Read-only file system')).length).toBe(4);
      expect(statSync(path.join(build)).isDirectory()).toBe(true);
      await expect(stat(path.join(build, 'planted'))).rejects.toThrow();
      expect(await readFile(path.join(out, 'made'), 'utf8')).toBe('ok\n');
      const made = await stat(path.join(out, 'made'));
      expect([made.uid, made.gid]).toEqual([0, 0]);
    } finally {
      await chmod(build, 0o755);
    }
  });

  it("cannot read another run's scratch, nor signal its processes", async () => {
    const first = sh('echo secret-a > /tmp/a; sleep 3; cat /tmp/a', { timeoutMs: 20_000 });
    await new Promise((resolve) => setTimeout(resolve, 800));
    const scratchRoot = path.join(dataDir, 'apps', 'scratch');
    const second = await sh(`ls ${scratchRoot}; grep -r secret-a ${scratchRoot} /tmp; kill -9 -1; echo survived`);
    expect(second.lines.join('\n')).not.toContain('secret-a');
    expect(second.lines.join('\n')).toMatch(/No such file/);
    const a = await first;
    expect(a.code).toBe(0);
    expect(a.lines).toContain('stdout: secret-a');
    // Its scratch is gone after the run.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(spawnSync('ls', ['-A', scratchRoot]).stdout.toString().trim()).toBe('');
  });

  it("cannot signal the service's processes", async () => {
    const victim = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const result = await sh(`kill -9 ${victim.pid}; kill -9 -1; echo tried`);
      expect(result.lines.join('\n')).toMatch(/No such process|tried/);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(victim.exitCode).toBeNull();
      expect(victim.signalCode).toBeNull();
    } finally {
      victim.kill('SIGKILL');
    }
  });

  it('runs under the documented limits on tasks and file size', async () => {
    const result = await sh("grep -E 'Max (processes|file size)' /proc/self/limits");
    expect(result.lines).toEqual([
      expect.stringMatching(new RegExp(`^stdout: Max file size +${SANDBOX_LIMITS.maxFileBytes} +${SANDBOX_LIMITS.maxFileBytes} +bytes`)),
      expect.stringMatching(new RegExp(`^stdout: Max processes +${SANDBOX_LIMITS.maxProcesses} +${SANDBOX_LIMITS.maxProcesses} +processes`)),
    ]);
  });

  it('ends a run past its time, the processes it started included', async () => {
    const started = Date.now();
    const result = await sh('sleep 60 & sleep 60', { timeoutMs: 500 });
    expect(result.timedOut).toBe(true);
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it('ends a run on abort', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const result = await sh('sleep 60', { signal: controller.signal });
    expect(result.timedOut).toBe(false);
    expect(result.code === null || result.code !== 0).toBe(true);
  });

  it('caps the lines of output it hands on', async () => {
    const result = await sh(`i=0; while [ $i -lt ${SANDBOX_LIMITS.maxLogLines + 50} ]; do echo $i; i=$((i+1)); done`);
    expect(result.code).toBe(0);
    expect(result.lines.length).toBe(SANDBOX_LIMITS.maxLogLines + 1);
    expect(result.lines.at(-1)).toMatch(/dropped/);
  });

  it('clears the scratch dirs a killed service left, at start', async () => {
    const left = path.join(dataDir, 'apps', 'scratch', 'left-over');
    await mkdir(path.join(left, 'deep'), { recursive: true });
    await writeFile(path.join(left, 'deep', 'file'), 'x');
    await clearScratch(dataDir);
    expect(spawnSync('ls', ['-A', path.join(dataDir, 'apps', 'scratch')]).stdout.toString().trim()).toBe('');
  });

  it('hands back what the code writes to fd 3', async () => {
    const result = await runSandboxed({ command: 'node', args: ['-e', 'require("fs").writeSync(3, JSON.stringify({ ok: true }))'], cwd: build, writable: [], readable: [build], env: {}, timeoutMs: 10_000, network: false, dataDir, resultFd: true });
    expect(result.code).toBe(0);
    expect(JSON.parse(result.result!)).toEqual({ ok: true });
  });
});
