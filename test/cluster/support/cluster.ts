/**
 * A one-node Kubernetes cluster with a real node, for the cluster tier. Everything runs as
 * processes of this test run, inside the network, mount and PID namespaces that
 * scripts/cluster-test.sh creates (startCluster refuses to run anywhere else):
 *
 *   etcd, kube-apiserver    test/k8s/support/control-plane.ts, bound to the node IP 10.200.0.1,
 *                           ServiceAccount admission on, authorization Node,RBAC
 *   kube-controller-manager every default controller (service accounts and tokens,
 *                           kube-root-ca.crt, deployments, replica sets, endpoint slices, GC, …)
 *   kube-scheduler
 *   containerd              Debian's 1.6.20 with runc, its own root/state/socket under the run's
 *                           temp dir; CNI bridge `cni0` (10.244.0.0/24) from Debian's plugins
 *   kubelet                 v1.36.3, cgroupfs driver on cgroup v1 (failCgroupV1: false), under
 *                           the cgroup root the script made; static token as system:node:<name>
 *   kube-proxy              iptables mode, so ClusterIP Services (and `kubernetes`) work from
 *                           pods and from the test process
 *
 * Images come from archives (`ctr -n k8s.io images import`), never from a registry: the
 * sandbox ("pause") image and the test image are built by scripts/cluster-test-image.sh.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ensureBinaries, startControlPlane, stopProcess, tokenKubeconfig, waitFor, type ControlPlaneInfo } from '../../k8s/support/control-plane.js';

const run = promisify(execFile);

export const NODE_NAME = 'bp-node';
export const POD_CIDR = '10.244.0.0/24';
export const SERVICE_CIDR = '10.96.0.0/24';
export const TEST_IMAGE = 'localhost/browserplane/testbox:test';
export const PAUSE_IMAGE = 'localhost/browserplane/pause:test';

export interface ClusterInfo extends ControlPlaneInfo {
  nodeName: string;
  nodeIp: string;
  /** containerd's socket (for `ctr --address`). */
  containerdSocket: string;
  /** A kubeconfig file for the admin (token auth), e.g. for kubectl or helm. */
  kubeconfigPath: string;
  /** A directory every pod may mount as hostPath (mode 0777), read by the tests. */
  sharedDir: string;
  /** Milliseconds: control plane up, node Ready, whole start. */
  timings: { controlPlaneMs: number; nodeReadyMs: number; totalMs: number };
}

export interface Cluster extends ClusterInfo {
  stop: () => Promise<void>;
}

/**
 * Imports an image archive into containerd's k8s.io namespace (`ctr images import`, which also
 * unpacks it for the overlayfs snapshotter the CRI uses), so pods can use it with
 * `imagePullPolicy: Never`. A docker-archive (what `podman save` writes by default) carries its
 * names (RepoTags); an oci-archive names images only by its `io.containerd.image.name` or
 * `org.opencontainers.image.ref.name` annotations, so pass `baseName` (e.g. `localhost/browserplane/api`) for those.
 */
export async function loadImage(info: Pick<ClusterInfo, 'containerdSocket'>, archive: string, baseName?: string): Promise<void> {
  await run('ctr', ['--address', info.containerdSocket, '-n', 'k8s.io', 'images', 'import', ...(baseName ? ['--base-name', baseName] : []), archive], {
    maxBuffer: 16 * 1024 * 1024,
  });
}

export function clusterKubeConfig(info: Pick<ClusterInfo, 'server' | 'caFile' | 'adminToken'>, token = info.adminToken): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'test', server: info.server, caData: readFileSync(info.caFile).toString('base64') }],
    users: [{ name: 'test', token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  return config;
}

function containerdConfig(dir: string): string {
  const q = JSON.stringify;
  return `version = 2
root = ${q(path.join(dir, 'root'))}
state = ${q(path.join(dir, 'state'))}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = ${q(path.join(dir, 'containerd.sock'))}

[ttrpc]
  address = ${q(path.join(dir, 'containerd-ttrpc.sock'))}

[plugins."io.containerd.internal.v1.opt"]
  path = ${q(path.join(dir, 'opt'))}

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${q(PAUSE_IMAGE)}
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = ${q(path.join(dir, 'cni'))}
`;
}

function cniConfig(dir: string): string {
  return JSON.stringify({
    cniVersion: '0.4.0',
    name: 'browserplane',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: true,
        ipMasq: true,
        hairpinMode: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: POD_CIDR }]], routes: [{ dst: '0.0.0.0/0' }], dataDir: path.join(dir, 'ipam') },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  });
}

async function killContainers(socket: string): Promise<void> {
  const ctr = (...args: string[]) => run('ctr', ['--address', socket, '-n', 'k8s.io', ...args]).catch(() => ({ stdout: '' }));
  const tasks = (await ctr('tasks', 'ls', '-q')).stdout.split('\n').filter(Boolean);
  for (const id of tasks) await ctr('tasks', 'kill', '-s', 'SIGKILL', id);
  for (const id of tasks) await ctr('tasks', 'delete', '-f', id);
}

/** Lazily unmounts everything mounted below dir (pod volumes, container root filesystems, netns files). */
async function unmountUnder(dir: string): Promise<void> {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((mountPoint): mountPoint is string => !!mountPoint && mountPoint.startsWith(dir + '/'))
    .sort((a, b) => b.length - a.length);
  for (const mountPoint of mounts) await run('umount', ['-l', mountPoint]).catch(() => undefined);
}

/** Starts the cluster; must run inside scripts/cluster-test.sh's namespaces. */
export async function startCluster(): Promise<Cluster> {
  if (process.env.BROWSERPLANE_CLUSTER_NETNS !== '1')
    throw new Error('startCluster runs only inside the namespaces of scripts/cluster-test.sh (make test-cluster): it adds bridges and iptables rules');
  const nodeIp = process.env.BROWSERPLANE_CLUSTER_NODE_IP ?? '10.200.0.1';
  const cgroupRoot = process.env.BROWSERPLANE_CLUSTER_CGROUP_ROOT;
  if (!cgroupRoot) throw new Error('BROWSERPLANE_CLUSTER_CGROUP_ROOT is not set (scripts/cluster-test.sh sets it)');
  const images = process.env.BROWSERPLANE_CLUSTER_IMAGES;
  if (!images) throw new Error('BROWSERPLANE_CLUSTER_IMAGES is not set (scripts/cluster-test.sh sets it)');

  const started = Date.now();
  const bin = await ensureBinaries('node');
  const nodeToken = randomBytes(24).toString('hex');
  const proxyToken = randomBytes(24).toString('hex');
  const plane = await startControlPlane({
    bin,
    address: nodeIp,
    serviceClusterIpRange: SERVICE_CIDR,
    serviceAccountAdmission: true,
    authorizationMode: 'Node,RBAC',
    extraTokens: [`${nodeToken},system:node:${NODE_NAME},uid-node,"system:nodes"`, `${proxyToken},system:kube-proxy,uid-kube-proxy`],
    controllerManager: true,
    scheduler: true,
  });
  const controlPlaneMs = Date.now() - started;
  const { dir, launch, checkAlive } = plane;
  const log = (message: string): void => console.log(`[cluster +${((Date.now() - started) / 1000).toFixed(1)}s] ${message}`);
  log(`control plane at ${plane.server} (logs in ${dir})`);

  try {
    const kubeconfigPath = path.join(dir, 'admin.kubeconfig');
    const sharedDir = path.join(dir, 'shared');
    await mkdir(sharedDir, { recursive: true });
    await chmod(sharedDir, 0o777);

    // containerd
    const containerdDir = path.join(dir, 'containerd');
    await mkdir(path.join(containerdDir, 'cni'), { recursive: true });
    await writeFile(path.join(containerdDir, 'config.toml'), containerdConfig(containerdDir));
    await writeFile(path.join(containerdDir, 'cni', '10-browserplane.conflist'), cniConfig(containerdDir));
    const containerdSocket = path.join(containerdDir, 'containerd.sock');
    const containerd = launch('containerd', ['--config', path.join(containerdDir, 'config.toml'), '--log-level', 'info'], { binary: 'containerd' });
    await waitFor(
      'containerd',
      async () => {
        if (!existsSync(containerdSocket)) return false;
        await run('ctr', ['--address', containerdSocket, 'version']);
        return true;
      },
      [],
      30_000,
    );
    checkAlive();
    for (const archive of ['pause.tar', 'testbox.tar']) await loadImage({ containerdSocket }, path.join(images, archive));
    log('containerd up, test images imported');

    // kubelet
    const kubeletDir = path.join(dir, 'kubelet');
    await mkdir(kubeletDir, { recursive: true });
    await writeFile(path.join(kubeletDir, 'kubeconfig'), tokenKubeconfig(plane.server, plane.caFile, nodeToken), { mode: 0o600 });
    await writeFile(
      path.join(kubeletDir, 'config.json'),
      JSON.stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        cgroupDriver: 'cgroupfs',
        cgroupRoot,
        // This machine has cgroup v1 (hybrid); v1.35+ kubelets refuse it unless told.
        failCgroupV1: false,
        containerRuntimeEndpoint: `unix://${containerdSocket}`,
        address: nodeIp,
        port: 10250,
        readOnlyPort: 0,
        healthzBindAddress: '127.0.0.1',
        healthzPort: 10248,
        authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
        authorization: { mode: 'AlwaysAllow' },
        failSwapOn: false,
        // Tests must not be evicted because the shared disk is fuller than a default threshold.
        evictionHard: { 'memory.available': '0%', 'nodefs.available': '0%', 'nodefs.inodesFree': '0%', 'imagefs.available': '0%' },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        serializeImagePulls: false,
        protectKernelDefaults: false,
        // Secrets/config maps reach pods without the default minute of cache.
        syncFrequency: '5s',
        nodeStatusUpdateFrequency: '4s',
        fileCheckFrequency: '5s',
        resolvConf: '/etc/resolv.conf',
        maxPods: 110,
      }),
    );
    const kubelet = launch('kubelet', [
      `--config=${path.join(kubeletDir, 'config.json')}`,
      `--kubeconfig=${path.join(kubeletDir, 'kubeconfig')}`,
      `--root-dir=${path.join(kubeletDir, 'root')}`,
      `--cert-dir=${path.join(kubeletDir, 'pki')}`,
      `--hostname-override=${NODE_NAME}`,
      `--node-ip=${nodeIp}`,
      '--v=2',
    ]);

    // kube-proxy
    // As system:kube-proxy, which the bootstrap binding system:node-proxier authorizes.
    await writeFile(path.join(dir, 'kube-proxy.kubeconfig'), tokenKubeconfig(plane.server, plane.caFile, proxyToken), { mode: 0o600 });
    await writeFile(
      path.join(dir, 'kube-proxy.json'),
      JSON.stringify({
        apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
        kind: 'KubeProxyConfiguration',
        mode: 'iptables',
        clientConnection: { kubeconfig: path.join(dir, 'kube-proxy.kubeconfig') },
        hostnameOverride: NODE_NAME,
        clusterCIDR: POD_CIDR,
        bindAddress: nodeIp,
        healthzBindAddress: '127.0.0.1:10256',
        metricsBindAddress: '127.0.0.1:10249',
        // Like kind: leave the conntrack sysctls alone (not all are per network namespace).
        conntrack: { maxPerCore: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
        iptables: { syncPeriod: '10s', minSyncPeriod: '0s' },
      }),
    );
    const kubeProxy = launch('kube-proxy', [`--config=${path.join(dir, 'kube-proxy.json')}`, '--v=2']);

    const core = clusterKubeConfig(plane).makeApiClient(CoreV1Api);
    await waitFor(
      'node Ready',
      async () => {
        checkAlive();
        const node = await core.readNode({ name: NODE_NAME });
        return node.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      },
      [],
      120_000,
    );
    const nodeReadyMs = Date.now() - started;
    log('node Ready');
    const timings = { controlPlaneMs, nodeReadyMs, totalMs: Date.now() - started };
    return {
      server: plane.server,
      caFile: plane.caFile,
      adminToken: plane.adminToken,
      nobodyToken: plane.nobodyToken,
      dir,
      nodeName: NODE_NAME,
      nodeIp,
      containerdSocket,
      kubeconfigPath,
      sharedDir,
      timings,
      stop: async () => {
        // Node first, so nothing restarts the containers; then the containers themselves (the
        // kernel would kill them with the PID namespace anyway, but their mounts are in the way
        // of removing the temp dir); then containerd and the control plane.
        await stopProcess(kubeProxy);
        await stopProcess(kubelet);
        await killContainers(containerdSocket);
        await stopProcess(containerd);
        await unmountUnder(dir);
        await plane.stop();
      },
    };
  } catch (error) {
    process.env.BROWSERPLANE_K8S_KEEP_LOGS ??= '1';
    console.error(`cluster start failed; logs kept in ${dir}`);
    await plane.stop();
    throw error;
  }
}
