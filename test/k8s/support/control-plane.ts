/**
 * A real Kubernetes control plane for tests: etcd and kube-apiserver built from Go modules
 * by scripts/k8s-test-binaries.sh, started with envtest's flags (loopback, free ports,
 * static tokens, a service-account signing key, RBAC on). No kubelet runs: pods are
 * scheduled nowhere unless a test runs the node agent.
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
  stop: () => Promise<void>;
}

/** Builds the binaries when missing (cold: ~12 min on 2 cores) and returns their folder. */
export async function ensureBinaries(): Promise<string> {
  const { stdout } = await promisify(execFile)(path.join(ROOT, 'scripts/k8s-test-binaries.sh'), {
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

async function waitFor(what: string, check: () => Promise<boolean>, processes: ChildProcess[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const dead = processes.find((child) => child.exitCode !== null);
    if (dead) throw new Error(`${what}: ${dead.spawnfile} exited with ${dead.exitCode}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what}: not ready after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

export async function startControlPlane(): Promise<ControlPlane> {
  const bin = await ensureBinaries();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-k8s-'));
  const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
  const processes: ChildProcess[] = [];
  const started = Date.now();
  const launch = (name: string, args: string[]): ChildProcess => {
    const log = createWriteStream(path.join(dir, `${name}.log`));
    const child = spawn(path.join(bin, name), args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    processes.push(child);
    return child;
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
    await writeFile(path.join(dir, 'tokens.csv'), `${adminToken},test-admin,uid-admin,"system:masters"\n${nobodyToken},test-nobody,uid-nobody\n`, {
      mode: 0o600,
    });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await writeFile(path.join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    await writeFile(path.join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));

    const certDir = path.join(dir, 'certs');
    launch('kube-apiserver', [
      `--etcd-servers=http://127.0.0.1:${etcdClient}`,
      `--cert-dir=${certDir}`,
      `--secure-port=${apiPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      // No controller-manager creates the default service account.
      '--disable-admission-plugins=ServiceAccount',
      '--authorization-mode=RBAC',
      `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
      `--service-account-issuer=https://127.0.0.1:${apiPort}/`,
      `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
    ]);
    const caFile = path.join(certDir, 'apiserver.crt');
    const server = `https://127.0.0.1:${apiPort}`;
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
    return { server, caFile, adminToken, nobodyToken, dir, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
