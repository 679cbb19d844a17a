/**
 * Real containers of the images `make images` built (scripts/images.sh), run with podman
 * and runc the way a kubelet runs the chart's and the operator's pods: the image's user
 * 10001, the root filesystem read-only with emptyDirs (host directories owned by the pod's
 * fsGroup, as a kubelet makes them) and a memory-backed /dev/shm, every capability
 * dropped, no new privileges, the pods' memory limits. The network is the host's with
 * every server bound to 127.0.0.1: nothing leaves loopback.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

export const ROOT = path.resolve(import.meta.dirname, '../../..');
const CACHE = process.env.BROWSERPLANE_CACHE ?? path.join(os.homedir(), '.cache/browserplane');
/** The configuration scripts/podman-env.sh writes (runc, cgroupfs, vfs, storage in the cache). */
export const PODMAN_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  CONTAINERS_CONF: path.join(CACHE, 'containers/containers.conf'),
  CONTAINERS_STORAGE_CONF: path.join(CACHE, 'containers/storage.conf'),
};
/** The images' user and the pods' runAsUser, runAsGroup and fsGroup. */
export const POD_UID = 10001;

const run = promisify(execFile);

export async function podman(args: string[], timeoutMs = 60_000): Promise<string> {
  const { stdout } = await run('podman', args, { env: PODMAN_ENV, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

/** Runs a command in the container as the container's user; never throws, reports the exit code. */
export async function exec(container: string, command: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('podman', ['exec', container, ...command], { env: PODMAN_ENV, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface PodOptions {
  image: string;
  /** A name prefix; a random suffix is added. */
  name: string;
  env: Record<string, string>;
  /** In place of the image's ENTRYPOINT (a Job's command). */
  entrypoint?: string[];
  /** Arguments after the image (the chart's args, e.g. dist/operator/src/main.js). */
  args?: string[];
  /** emptyDir volumes: their mount paths. */
  emptyDirs?: string[];
  /** Host files mounted read-only (a kubeconfig, as a projected Secret would be). */
  files?: { host: string; path: string }[];
  /** A memory-backed /dev/shm of this size (the browser pod's dshm emptyDir). */
  shmSize?: string;
  /** limits.memory */
  memory: string;
  /** 'runtime-default': podman's default seccomp profile; 'unconfined': none. */
  seccomp: 'runtime-default' | 'unconfined';
}

export interface Pod {
  name: string;
  /** The host pid of the container's first process. */
  pid(): Promise<number>;
  logs(): Promise<string>;
  exec(command: string[]): ReturnType<typeof exec>;
  /** True while the container runs. */
  running(): Promise<boolean>;
  remove(): Promise<void>;
}

/** `podman run -d` with the pod securityContext of the chart and of operator/src/k8s/browser-pod.ts. */
export async function startPod(options: PodOptions): Promise<Pod> {
  const name = `${options.name}-${randomBytes(4).toString('hex')}`;
  const dirs: string[] = [];
  const volumeArgs: string[] = [];
  for (const mountPath of options.emptyDirs ?? []) {
    // A kubelet's emptyDir: a node directory, mode 0777, group-owned by fsGroup with setgid.
    const dir = await mkdtemp(path.join(os.tmpdir(), `bp-emptydir-${name}-`));
    await chown(dir, 0, POD_UID);
    await chmod(dir, 0o2777);
    dirs.push(dir);
    volumeArgs.push('--volume', `${dir}:${mountPath}:rw`);
  }
  for (const file of options.files ?? []) volumeArgs.push('--volume', `${file.host}:${file.path}:ro`);
  const args = [
    'run',
    '--detach',
    '--name',
    name,
    '--pull=never',
    '--network=host',
    // runAsUser/runAsGroup, fsGroup as a supplementary group.
    `--user=${POD_UID}:${POD_UID}`,
    `--group-add=${POD_UID}`,
    // readOnlyRootFilesystem, and no tmpfs podman would add on /tmp, /var/tmp and /run.
    '--read-only',
    '--read-only-tmpfs=false',
    // capabilities.drop [ALL], allowPrivilegeEscalation false.
    '--cap-drop=all',
    '--security-opt=no-new-privileges',
    ...(options.seccomp === 'unconfined' ? ['--security-opt=seccomp=unconfined'] : []),
    `--memory=${options.memory}`,
    ...(options.shmSize ? [`--shm-size=${options.shmSize}`] : []),
    ...volumeArgs,
    ...Object.entries(options.env).flatMap(([key, value]) => ['--env', `${key}=${value}`]),
    ...(options.entrypoint ? ['--entrypoint', JSON.stringify(options.entrypoint)] : []),
    options.image,
    ...(options.args ?? []),
  ];
  await podman(args);
  return {
    name,
    pid: async () => Number((await podman(['inspect', '--format', '{{.State.Pid}}', name])).trim()),
    logs: async () => {
      const { stdout, stderr } = await run('podman', ['logs', name], { env: PODMAN_ENV, maxBuffer: 64 * 1024 * 1024 });
      return stdout + stderr;
    },
    exec: (command) => exec(name, command),
    running: async () => (await podman(['inspect', '--format', '{{.State.Running}}', name])).trim() === 'true',
    remove: async () => {
      await podman(['rm', '--force', '--time', '10', name]).catch(() => undefined);
      for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Status lines of a host process: Uid, Gid, CapEff, NoNewPrivs, Seccomp, NSpid. */
export async function processStatus(pid: number): Promise<Record<string, string>> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  return Object.fromEntries(text.split('\n').filter(Boolean).map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]));
}

/** The host pids of every process under `pid` (itself included). */
export async function processTree(pid: number): Promise<number[]> {
  const found = [pid];
  for (let index = 0; index < found.length; index++) {
    const parent = found[index]!;
    const tasks = await readdir(`/proc/${parent}/task`).catch(() => [] as string[]);
    for (const task of tasks) {
      const children = await readFile(`/proc/${parent}/task/${task}/children`, 'utf8').catch(() => '');
      for (const child of children.split(' ').filter(Boolean)) found.push(Number(child));
    }
  }
  return found;
}

/** argv; Chromium's zygote children rewrite theirs as one space-separated string, so spaces split too. */
export async function commandLine(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split(/[\0 ]/).filter(Boolean);
}
