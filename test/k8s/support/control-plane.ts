/**
 * A real Kubernetes control plane for tests: etcd and kube-apiserver built from Go modules
 * by scripts/k8s-test-binaries.sh, started with envtest's flags (loopback, free ports,
 * static tokens, a service-account signing key, RBAC on). No kubelet runs: pods are
 * scheduled nowhere unless a test runs the node agent.
 *
 * The cluster tier (test/cluster/support/cluster.ts) starts the same control plane with
 * `ControlPlaneOptions` for a real node: bound to the node IP inside its network namespace,
 * ServiceAccount admission on, kube-controller-manager and kube-scheduler running.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Agent, fetch as undiciFetch } from 'undici';
import { eventually } from '../../support/eventually.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');

export interface ControlPlaneInfo {
  server: string;
  caFile: string;
  /** Bearer token of a system:masters user. */
  adminToken: string;
  /** Bearer token of a user with no bindings (RBAC checks). */
  nobodyToken: string;
  dir: string;
}

export interface ControlPlane extends ControlPlaneInfo {
  /** Folder of the binaries, for callers that start more components. */
  bin: string;
  /** Starts a binary from `bin` with its output in `dir/<name>.log`; `stop` ends it (in reverse order). */
  launch: (name: string, args: string[], options?: { binary?: string; env?: NodeJS.ProcessEnv }) => ChildProcess;
  /** Fails when a launched process has exited. */
  checkAlive: () => void;
  stop: () => Promise<void>;
}

export interface ControlPlaneOptions {
  /** Address the API server listens on and advertises (the `kubernetes` Service's endpoint). Default 127.0.0.1. */
  address?: string;
  /** Default 10.0.0.0/24. */
  serviceClusterIpRange?: string;
  /** ServiceAccount admission (mounts the token volume into pods). Off by default: nothing creates `default` SAs without a controller-manager. */
  serviceAccountAdmission?: boolean;
  /** Extra lines for the static token file: `token,user,uid,"group1,group2"`. */
  extraTokens?: string[];
  /** Default RBAC. */
  authorizationMode?: string;
  /** Starts kube-controller-manager with the default controllers (needs the 'control-plane' binary set). */
  controllerManager?: boolean;
  /** Starts kube-scheduler (needs the 'node' binary set). */
  scheduler?: boolean;
  /** Binary folder; default: build the control-plane set when missing. */
  bin?: string;
}

/** Builds the binaries when missing (cold: ~12 min on 2 cores) and returns their folder. */
export async function ensureBinaries(set: 'control-plane' | 'node' = 'control-plane'): Promise<string> {
  const { stdout } = await promisify(execFile)(path.join(ROOT, 'scripts/k8s-test-binaries.sh'), [set], {
    maxBuffer: 16 * 1024 * 1024,
  });
  return stdout.trim().split('\n').at(-1)!;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export async function waitFor(what: string, check: () => Promise<boolean>, processes: ChildProcess[], timeoutMs: number): Promise<void> {
  await eventually(
    async () => {
      // A process that died will not get ready: say so now.
      const dead = processes.find((child) => child.exitCode !== null);
      if (dead) throw new Error(`${what}: ${dead.spawnfile} exited with ${dead.exitCode}`);
      return check().catch(() => false);
    },
    { timeoutMs, intervalMs: 250, what: `${what} to be ready` },
  );
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const bin = options.bin ?? (await ensureBinaries());
  const address = options.address ?? '127.0.0.1';
  const dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-k8s-'));
  const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
  const processes: ChildProcess[] = [];
  const started = Date.now();
  const launch = (name: string, args: string[], launchOptions: { binary?: string; env?: NodeJS.ProcessEnv } = {}): ChildProcess => {
    const log = createWriteStream(path.join(dir, `${name}.log`));
    const binary = launchOptions.binary ?? path.join(bin, name);
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], env: launchOptions.env ?? process.env });
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    child.on('error', (error) => log.write(`spawn error: ${error.message}\n`));
    processes.push(child);
    return child;
  };
  const checkAlive = (): void => {
    const dead = processes.find((child) => child.exitCode !== null || child.signalCode !== null);
    if (dead) throw new Error(`${dead.spawnfile} exited with ${dead.exitCode ?? dead.signalCode} (log: ${dir})`);
  };
  const stop = async (): Promise<void> => {
    for (const child of [...processes].reverse()) await stopProcess(child);
    if (process.env.BROWSERPLANE_K8S_KEEP_LOGS) return;
    await rm(dir, { recursive: true, force: true });
  };

  try {
    launch('etcd', [
      '--name=test',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=test=http://127.0.0.1:${etcdPeer}`,
      '--unsafe-no-fsync',
      '--watch-progress-notify-interval=5s',
      '--log-level=warn',
    ]);
    await waitFor(
      'etcd',
      async () => ((await (await fetch(`http://127.0.0.1:${etcdClient}/health`)).json()) as { health: string }).health === 'true',
      processes,
      60_000,
    );

    const adminToken = randomBytes(24).toString('hex');
    const nobodyToken = randomBytes(24).toString('hex');
    const tokens = [`${adminToken},test-admin,uid-admin,"system:masters"`, `${nobodyToken},test-nobody,uid-nobody`, ...(options.extraTokens ?? [])];
    await writeFile(path.join(dir, 'tokens.csv'), tokens.join('\n') + '\n', { mode: 0o600 });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(path.join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(path.join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

    const certDir = path.join(dir, 'certs');
    launch('kube-apiserver', [
      `--etcd-servers=http://127.0.0.1:${etcdClient}`,
      `--cert-dir=${certDir}`,
      `--secure-port=${apiPort}`,
      `--bind-address=${address}`,
      `--advertise-address=${address}`,
      `--service-cluster-ip-range=${options.serviceClusterIpRange ?? '10.0.0.0/24'}`,
      '--allow-privileged=true',
      // Reaching a kubelet (logs, exec) by its InternalIP: node names resolve nowhere here.
      '--kubelet-preferred-address-types=InternalIP,Hostname',
      // Without a controller-manager nothing creates the default service account.
      ...(options.serviceAccountAdmission ? [] : ['--disable-admission-plugins=ServiceAccount']),
      `--authorization-mode=${options.authorizationMode ?? 'RBAC'}`,
      `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
      `--service-account-issuer=https://${address}:${apiPort}/`,
      `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
    ]);
    const caFile = path.join(certDir, 'apiserver.crt');
    const server = `https://${address}:${apiPort}`;
    let dispatcher: Agent | undefined;
    await waitFor(
      'kube-apiserver',
      async () => {
        if (!existsSync(caFile)) return false;
        dispatcher ??= new Agent({ connect: { ca: readFileSync(caFile) } });
        const response = await undiciFetch(`${server}/readyz`, { headers: { authorization: `Bearer ${adminToken}` }, dispatcher });
        return response.ok && (await response.text()) === 'ok';
      },
      processes,
      120_000,
    );
    await dispatcher?.close();
    if (process.env.BROWSERPLANE_K8S_VERBOSE) console.log(`control plane ready in ${Date.now() - started} ms at ${server}`);

    if (options.controllerManager || options.scheduler) {
      // The components authenticate with the admin token: enough for a test, and it keeps
      // client certificates out of the harness.
      const kubeconfig = path.join(dir, 'admin.kubeconfig');
      await writeFile(kubeconfig, tokenKubeconfig(server, caFile, adminToken), { mode: 0o600 });
      // One replica each, serving no port of their own.
      const common = [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        '--secure-port=0',
      ];
      if (options.controllerManager) {
        launch('kube-controller-manager', [
          ...common,
          // Every controller a default cluster runs (serviceaccount, serviceaccount-token,
          // root-ca-certificate-publisher, deployment, replicaset, statefulset, endpointslice,
          // garbage-collector, namespace, pod-garbage-collector, …).
          '--controllers=*',
          '--use-service-account-credentials=false',
          `--root-ca-file=${caFile}`,
          `--service-account-private-key-file=${path.join(dir, 'sa.key')}`,
          `--service-cluster-ip-range=${options.serviceClusterIpRange ?? '10.0.0.0/24'}`,
          '--allocate-node-cidrs=false',
          '--concurrent-gc-syncs=5',
        ]);
      }
      if (options.scheduler) {
        launch('kube-scheduler', common);
      }
    }
    return { server, caFile, adminToken, nobodyToken, dir, bin, launch, checkAlive, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A kubeconfig for a bearer token (kubelet, kube-proxy, the controllers). */
export function tokenKubeconfig(server: string, caFile: string, token: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: 'test', user: { token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'test' } }],
    'current-context': 'test',
  });
}
