// The runner image (docker/runner.Dockerfile) as the app Jobs' pods run it (app-jobs.ts):
// uid/gid 10001, read-only root filesystem, emptyDirs on /work and /tmp, every capability
// dropped, no privilege escalation, the run Job's memory limit. Real: the image `make
// images` built, run by podman with runc. What the pod program needs from it is checked in
// the container: Node, python3 with a working venv (Python builds make one under /work),
// git, the environment the image sets, and nothing writable outside the emptyDirs. (The
// pod program itself is tested in test/integration; the whole Job flow in test/cluster/apps.test.ts.)
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { podman, POD_UID, startPod, type Pod } from './support/containers.js';

let pod: Pod;

beforeAll(async () => {
  pod = await startPod({
    image: inject('images').runner,
    name: 'runner',
    env: { HOME: '/work/home', TMPDIR: '/tmp' },
    entrypoint: ['sleep', 'infinity'],
    emptyDirs: ['/work', '/tmp'],
    memory: '1536m',
    seccomp: 'runtime-default',
  });
}, 60_000);
afterAll(async () => {
  await pod?.remove();
});

describe('the runner image', () => {
  it('starts the app Job program as uid 10001 in pod sandbox mode', async () => {
    const config = JSON.parse(await podman(['image', 'inspect', '--format', '{{json .Config}}', inject('images').runner])) as { Entrypoint: string[]; Cmd?: string[] | null; User: string; Env: string[] };
    expect(config.Entrypoint).toEqual(['node', 'dist/api/src/modules/apps/pod/job-main.js']);
    expect(config.Cmd ?? []).toEqual([]);
    expect(config.User).toBe(`${POD_UID}:${POD_UID}`);
    expect(config.Env).toEqual(expect.arrayContaining(['BROWSERPLANE_APP_SANDBOX=pod', 'HOME=/work/home']));
    const id = await pod.exec(['id', '-u']);
    expect(id.stdout.trim()).toBe(String(POD_UID));
    // The entry point is there: without a Job's arguments it says how it is called.
    const bare = await pod.exec(['node', 'dist/api/src/modules/apps/pod/job-main.js']);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toMatch(/^usage: job-main\.js build <deploymentId> \| invoke/);
  });

  it('has Node, python3 with a venv that works under /work, and git', async () => {
    const node = await pod.exec(['node', '-e', 'console.log(process.versions.node.split(".")[0])']);
    expect(Number(node.stdout.trim())).toBeGreaterThanOrEqual(20);
    const venv = await pod.exec(['sh', '-c', 'python3 -m venv /work/venv && /work/venv/bin/python -c "import sys, ensurepip; print(sys.prefix)" && /work/venv/bin/pip --version']);
    expect(venv.code, venv.stderr).toBe(0);
    expect(venv.stdout).toMatch(/^\/work\/venv\npip \d+/);
    const git = await pod.exec(['sh', '-c', 'cd /work && git init -q repo && cd repo && echo x > f && git add f && git -c user.name=t -c user.email=t@t commit -qm one && git rev-list --count HEAD']);
    expect(git.code, git.stderr).toBe(0);
    expect(git.stdout.trim()).toBe('1');
  });

  it('writes only to its emptyDirs', async () => {
    for (const place of ['/probe', '/app/probe', '/usr/local/lib/probe']) {
      const write = await pod.exec(['sh', '-c', `: > ${place}`]);
      expect(write.code, place).not.toBe(0);
      expect(write.stderr, place).toMatch(/Read-only file system/);
    }
    for (const place of ['/work/probe', '/tmp/probe']) expect((await pod.exec(['sh', '-c', `: > ${place}`])).code, place).toBe(0);
  });
});
