/**
 * The test suite's node agent: what the scheduler and a kubelet do for browser pods, with
 * real processes, so the kubernetes tier runs Chromium without a container runtime.
 *
 * A FAKE KUBELET, and why it stays (issue 17): the real node is the cluster tier
 * (test/cluster/, `make test-cluster`: kubelet, containerd, runc, kube-proxy, our images,
 * Helm end to end). This agent stays for the Kubernetes tier's operator and runtime tests
 * (api-kubernetes-mode, browser-pod-placement, browser-session-reconciler, gitops-pool,
 * gitops-pool-failover, kubernetes-runtime, operator-events, operator-process) because
 * that tier runs on every `make test`, a fresh machine's included, where the images and the
 * node binaries are not built yet (building them would take a cold run past an hour; see
 * scripts/container-tiers.sh), and because several of those tests need what a kubelet does
 * not offer a test: several nodes with chosen labels and taints at once (placement), a pod's
 * agent killed at an exact moment and observed from the host (failover, faults), pods in
 * many namespaces started in well under a second each. What it cannot show (the pod spec
 * applied by a kubelet: securityContext, read-only root, probes, limits, Secrets as env,
 * termination; the image itself) the cluster tier shows on the real node.
 *
 * - Node: registered with a Ready condition and capacity; kept alive with a Lease in
 *   kube-node-lease renewed every 10 s, as kubelets have done since NodeLease went GA
 *   (1.17): the lease is the heartbeat, a full status write only happens on change. No
 *   node lifecycle controller runs here to read either; the lease is there so a test or a
 *   future controller-manager sees the node alive the way it would in a cluster.
 * - Scheduler: binds unbound pods (schedulerName default-scheduler) in the watched
 *   namespaces to the node through pods/binding, when the pod's nodeSelector matches the
 *   node's labels and its tolerations tolerate the node's NoSchedule/NoExecute taints
 *   (support/scheduling.ts); a pod that does not fit stays Pending for another node.
 *   Resources and affinity terms are not judged (the test nodes never compete).
 * - Kubelet: for each pod bound to the node, a "sandbox": its own loopback address
 *   127.0.0.N (N from a pool, never 1) as podIP and a directory for its emptyDir volumes
 *   and log. Each container's process comes from the image map (image repository →
 *   command); env is resolved as the kubelet does (value with $(VAR), secret and
 *   configMap keys, fieldRef), env values naming a volume's mount path are rewritten to
 *   the volume's directory, and the image entry may force variables (the browser image
 *   forces AGENT_HOST to the pod IP: a pod's 0.0.0.0 is its own network namespace, the
 *   pod IP is the nearest thing here). Status goes through pods/status as a kubelet
 *   writes it; readiness and liveness probes run at their period.
 * - A container's processes: its process group plus every process group whose command
 *   line names the sandbox dir (Chromium and Xvfb lead groups of their own). When the
 *   main process exits the rest is SIGKILLed, as the kernel does when a pid namespace's
 *   init dies. Deletion: SIGTERM to the main process, SIGKILL to all after the grace
 *   period, terminal status, then delete with gracePeriodSeconds 0 as the kubelet
 *   finalises; a pod gone from the API (force delete) is killed at once.
 *
 * Processes run as the node agent's user (root here), as the embedded runtime runs
 * agents: runAsUser, capabilities and seccomp are not applied.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  ListWatch,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  Watch,
  type KubeConfig,
  type V1Container,
  type V1Pod,
  type V1Probe,
  type V1Taint,
} from '@kubernetes/client-node';
import { isProcessAlive, processGroupMembers, signalProcessGroup, waitForProcessGroupExit } from '../../../lib/process-group.js';
import { packageRoot } from '../../../api/src/paths.js';
import { Controller, objectKey, splitKey, type ControllerLog } from '../../../operator/src/k8s/controller.js';
import { AGENT_NODE_FLAGS, processGroupsMentioning } from '../../../api/src/runtime/agent-process.js';
import { misfit, type NodePlacement } from './scheduling.js';

/** What runs for an image: the process (its entrypoint) and variables forced over the pod's. */
export interface ImageEntry {
  argv: string[];
  forcedEnv?(context: { podIP: string }): Record<string, string>;
}

/** The browser image's repository (charts/browserplane values: browsers.image.repository). */
export const BROWSER_IMAGE_REPOSITORY = 'browserplane/browser';

/** The default image map: the browser image runs the built agent (make build). */
export function defaultImages(): Record<string, ImageEntry> {
  return {
    [BROWSER_IMAGE_REPOSITORY]: {
      argv: [process.execPath, ...AGENT_NODE_FLAGS, path.join(packageRoot(), 'dist/agent/src/main.js')],
      forcedEnv: ({ podIP }) => ({ AGENT_HOST: podIP }),
    },
  };
}

export interface NodeAgentOptions {
  config: KubeConfig;
  nodeName: string;
  /** Namespaces whose unbound pods this agent schedules onto its node. */
  namespaces: string[];
  /** Image repository (no tag or digest) → what runs. Default: defaultImages(). */
  images?: Record<string, ImageEntry>;
  /** Last octets of the pod addresses 127.0.0.N. Default 2..254; give parallel agents disjoint ranges. */
  addresses?: { first: number; last: number };
  log?: ControllerLog;
  /** How often the node Lease is renewed. Default 10 s, the kubelet's. */
  leaseRenewMs?: number;
  /** Node labels on top of the standard ones (kubernetes.io/hostname, os, arch). */
  labels?: Record<string, string>;
  /** Node taints; pods without a matching toleration are left for other nodes. Default none. */
  taints?: V1Taint[];
}

export interface RunningContainer {
  name: string;
  pid: number;
}

export interface NodeAgent {
  nodeName: string;
  /** The sandbox dir of a pod this agent runs (volumes under volumes/<name>, log in pod.log). */
  sandboxDir(namespace: string, name: string): string | undefined;
  /** Main processes of a pod's containers that still run. */
  containers(namespace: string, name: string): RunningContainer[];
  /** Kills every process this agent started, removes its dirs, deregisters the node. */
  stop(): Promise<void>;
}

interface ContainerExit {
  exitCode: number;
  signal?: NodeJS.Signals;
  finishedAt: string;
  startError?: string;
}

interface Container {
  spec: V1Container;
  child?: ChildProcess;
  pid?: number;
  startedAt?: string;
  exit?: ContainerExit;
  waiting?: { reason: string; message: string };
  ready: boolean;
  /** Why the node agent killed it, when it did (liveness). */
  killedFor?: string;
  stopProbes: (() => void)[];
}

interface Sandbox {
  key: string;
  uid: string;
  ip: string;
  dir: string;
  logFile: string;
  startTime: string;
  containers: Container[];
  /** type → status and when it last changed, so lastTransitionTime moves only on a flip. */
  transitions: Map<string, { status: string; at: string }>;
  lastWritten?: string;
}

const TERMINAL = new Set(['Succeeded', 'Failed']);
/** Kubernetes times are RFC 3339 with second precision. */
const now = () => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const statusOf = (error: unknown) => (error instanceof ApiException ? error.code : undefined);
const quiet: ControllerLog = { info: () => {}, warn: () => {} };

class ConfigError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

function repositoryOf(image: string): string {
  const [withoutDigest = ''] = image.split('@');
  const lastSlash = withoutDigest.lastIndexOf('/');
  const colon = withoutDigest.indexOf(':', lastSlash + 1);
  return colon < 0 ? withoutDigest : withoutDigest.slice(0, colon);
}

/** Free when nothing listens on any of the pod's TCP ports at that address. */
async function addressFree(ip: string, ports: number[]): Promise<boolean> {
  for (const port of ports) {
    const free = await new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once('error', () => resolve(false));
      server.listen(port, ip, () => server.close(() => resolve(true)));
    });
    if (!free) return false;
  }
  return true;
}

export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const { config, nodeName } = options;
  const log = options.log ?? quiet;
  const core = config.makeApiClient(CoreV1Api);
  const images = options.images ?? defaultImages();
  const range = options.addresses ?? { first: 2, last: 254 };
  if (range.first < 2 || range.last > 254 || range.first > range.last) throw new Error('addresses must lie within 2..254');
  // Short: Chromium's singleton socket under the work dir has a 107-byte path limit.
  const root = path.join(os.tmpdir(), `bpnode-${randomBytes(4).toString('hex')}`);
  await mkdir(root, { recursive: true, mode: 0o711 });
  const sandboxes = new Map<string, Sandbox>();
  const usedAddresses = new Set<string>();
  const watched = new Set(options.namespaces);
  const stopping = new AbortController();

  const placement: NodePlacement = { labels: { ...nodeLabels(nodeName), ...options.labels }, taints: options.taints ?? [] };
  await registerNode(core, nodeName, placement);
  const stopLease = await keepNodeLease(config, nodeName, options.leaseRenewMs ?? 10_000, log);

  const listWatch = (fieldSelector: string) =>
    new ListWatch<V1Pod>('/api/v1/pods', new Watch(config), () => core.listPodForAllNamespaces({ fieldSelector }), false, undefined, fieldSelector);
  const unbound = listWatch('spec.nodeName=');
  const bound = listWatch(`spec.nodeName=${nodeName}`);

  const scheduler = new Controller({
    name: `scheduler-${nodeName}`,
    sources: [{ name: 'unbound-pods', informer: unbound, keysOf: (pod) => (watched.has(pod.metadata?.namespace ?? '') ? [objectKey(pod)] : []) }],
    reconcile: (key) => schedule(key),
    workers: 1,
    log,
    watchBackoffMs: { initial: 200, max: 2_000 },
  });
  const kubelet = new Controller({
    name: `kubelet-${nodeName}`,
    sources: [{ name: 'bound-pods', informer: bound, keysOf: (pod) => [objectKey(pod)] }],
    reconcile: (key) => syncPod(key),
    // A pod being deleted holds a worker for its grace period.
    workers: 4,
    log,
    watchBackoffMs: { initial: 200, max: 2_000 },
  });

  async function schedule(key: string): Promise<void> {
    const { namespace, name } = splitKey(key);
    const pod = unbound.get(name, namespace);
    if (!pod || pod.spec?.nodeName || pod.metadata?.deletionTimestamp) return;
    if ((pod.spec?.schedulerName ?? 'default-scheduler') !== 'default-scheduler') return;
    const why = misfit(pod, placement);
    if (why) {
      log.warn({ pod: key, node: nodeName, reason: why }, 'pod does not fit the node; left pending');
      return;
    }
    try {
      await core.createNamespacedPodBinding({
        name,
        namespace: namespace!,
        body: { apiVersion: 'v1', kind: 'Binding', metadata: { name, uid: pod.metadata!.uid }, target: { apiVersion: 'v1', kind: 'Node', name: nodeName } },
      });
    } catch (error) {
      // 409: bound meanwhile (by us, from a stale cache); 404: deleted.
      if (statusOf(error) !== 409 && statusOf(error) !== 404) throw error;
    }
  }

  async function syncPod(key: string): Promise<{ requeueAfterMs: number } | void> {
    const { namespace, name } = splitKey(key);
    const pod = bound.get(name, namespace);
    let sandbox = sandboxes.get(key);
    if (sandbox && (!pod || pod.metadata?.uid !== sandbox.uid)) {
      // Gone from the API without our finalising it: force-deleted. No grace.
      await removeSandbox(sandbox, 0);
      sandbox = undefined;
    }
    if (!pod) return;
    if (pod.metadata?.deletionTimestamp) return finalise(pod, sandbox);
    if (!sandbox) {
      // Finished before this agent started: nothing to run, nothing to report.
      if (TERMINAL.has(pod.status?.phase ?? '')) return;
      sandbox = await createSandbox(pod);
      // Pending with its address, containers ContainerCreating: the kubelet's first report.
      await writeStatus(pod, sandbox);
    }
    const retry = await startContainers(pod, sandbox);
    await writeStatus(pod, sandbox);
    return retry ? { requeueAfterMs: 1_000 } : undefined;
  }

  async function createSandbox(pod: V1Pod): Promise<Sandbox> {
    const ports = (pod.spec?.containers ?? []).flatMap((c) => (c.ports ?? []).filter((p) => (p.protocol ?? 'TCP') === 'TCP').map((p) => p.containerPort));
    let ip: string | undefined;
    for (let n = range.first; n <= range.last && !ip; n++) {
      const candidate = `127.0.0.${n}`;
      if (usedAddresses.has(candidate)) continue;
      usedAddresses.add(candidate);
      if (await addressFree(candidate, ports)) ip = candidate;
      else usedAddresses.delete(candidate);
    }
    if (!ip) throw new Error(`no free pod address in 127.0.0.${range.first}..${range.last}`);
    const dir = path.join(root, pod.metadata!.uid!.slice(0, 8));
    await mkdir(path.join(dir, 'volumes'), { recursive: true, mode: 0o711 });
    const sandbox: Sandbox = {
      key: objectKey(pod),
      uid: pod.metadata!.uid!,
      ip,
      dir,
      logFile: path.join(dir, 'pod.log'),
      startTime: now(),
      containers: (pod.spec?.containers ?? []).map((spec) => ({ spec, ready: false, stopProbes: [] })),
      transitions: new Map(),
    };
    sandboxes.set(sandbox.key, sandbox);
    return sandbox;
  }

  /** Starts what has not started; true when one could not start yet and is worth retrying. */
  async function startContainers(pod: V1Pod, sandbox: Sandbox): Promise<boolean> {
    let retry = false;
    for (const container of sandbox.containers) {
      if (container.child || container.exit) continue;
      try {
        await startContainer(pod, sandbox, container);
        delete container.waiting;
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        container.waiting = { reason: error.reason, message: error.message };
        retry = true;
      }
    }
    return retry;
  }

  async function startContainer(pod: V1Pod, sandbox: Sandbox, container: Container): Promise<void> {
    const { spec } = container;
    const image = images[repositoryOf(spec.image ?? '')];
    if (!image) throw new ConfigError('ErrImagePull', `image "${spec.image}" is not in the node agent's image map`);
    if (spec.command?.length || spec.args?.length) throw new ConfigError('CreateContainerError', 'the node agent runs an image by its entrypoint; command and args are not supported');
    const volumes = new Map<string, string>();
    for (const mount of spec.volumeMounts ?? []) {
      const volume = pod.spec?.volumes?.find((v) => v.name === mount.name);
      // Memory-backed emptyDirs (/dev/shm) are the node's own here.
      if (!volume?.emptyDir || volume.emptyDir.medium === 'Memory') continue;
      const dir = path.join(sandbox.dir, 'volumes', mount.name);
      await mkdir(dir, { recursive: true, mode: 0o711 });
      volumes.set(mount.mountPath, dir);
    }
    const env = await resolveEnv(pod, sandbox.ip, spec, volumes);
    const [command = '', ...args] = image.argv;
    const logFd = await open(sandbox.logFile, 'a', 0o600);
    try {
      const child = spawn(command, args, {
        // Its own process group: the container's processes are found and killed through it.
        detached: true,
        stdio: ['ignore', logFd.fd, logFd.fd],
        cwd: sandbox.dir,
        env: {
          PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
          LANG: process.env.LANG ?? 'C.UTF-8',
          HOSTNAME: pod.metadata!.name!,
          ...env,
          ...image.forcedEnv?.({ podIP: sandbox.ip }),
        },
      });
      child.unref();
      container.child = child;
      container.pid = child.pid;
      container.startedAt = now();
      child.once('exit', (code, signal) => onContainerExit(sandbox, container, code, signal));
      child.once('error', (error) => {
        // Not started at all (no exit follows): the runtime's StartError, exit code 128.
        if (child.pid !== undefined || container.exit) return;
        container.exit = { exitCode: 128, finishedAt: now(), startError: error.message };
        kubelet.queue.add(sandbox.key);
      });
    } finally {
      await logFd.close();
    }
    const ports = new Map((spec.ports ?? []).filter((p) => p.name).map((p) => [p.name!, p.containerPort]));
    const changed = () => kubelet.queue.add(sandbox.key);
    if (spec.readinessProbe) {
      container.stopProbes.push(
        runProbe(spec.readinessProbe, sandbox.ip, ports, false, (ok) => {
          container.ready = ok;
          changed();
        }),
      );
    } else container.ready = true;
    if (spec.livenessProbe) {
      const graceMs = 1000 * (spec.livenessProbe.terminationGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30);
      container.stopProbes.push(
        runProbe(spec.livenessProbe, sandbox.ip, ports, true, (ok) => {
          if (ok || container.exit) return;
          container.killedFor = 'liveness probe failed';
          void killContainer(sandbox, container, graceMs);
        }),
      );
    }
  }

  async function resolveEnv(pod: V1Pod, podIP: string, spec: V1Container, volumes: Map<string, string>): Promise<Record<string, string>> {
    const env: Record<string, string> = {};
    const namespace = pod.metadata!.namespace!;
    if (spec.envFrom?.length) throw new ConfigError('CreateContainerConfigError', 'envFrom is not supported by the node agent');
    for (const variable of spec.env ?? []) {
      let value: string | undefined;
      const from = variable.valueFrom;
      if (!from) value = expand(variable.value ?? '', env);
      else if (from.secretKeyRef || from.configMapKeyRef) {
        const ref = (from.secretKeyRef ?? from.configMapKeyRef)!;
        const kind = from.secretKeyRef ? 'secret' : 'configmap';
        const object = await (from.secretKeyRef ? core.readNamespacedSecret({ name: ref.name!, namespace }) : core.readNamespacedConfigMap({ name: ref.name!, namespace })).catch(
          (error: unknown) => {
            if (statusOf(error) === 404) return undefined;
            throw error;
          },
        );
        const raw = object?.data?.[ref.key];
        value = raw === undefined ? undefined : from.secretKeyRef ? Buffer.from(raw, 'base64').toString('utf8') : raw;
        if (value === undefined && !ref.optional) {
          throw new ConfigError('CreateContainerConfigError', object ? `couldn't find key ${ref.key} in ${kind} ${namespace}/${ref.name}` : `${kind} "${ref.name}" not found`);
        }
      } else if (from.fieldRef) value = fieldValue(pod, podIP, from.fieldRef.fieldPath);
      else throw new ConfigError('CreateContainerConfigError', `env ${variable.name}: only value, secretKeyRef, configMapKeyRef and fieldRef are supported`);
      if (value === undefined) continue;
      // Once, by the longest mount path the value lies under: the rewritten value is a host
      // path (under /tmp), which must not be taken for the pod's /tmp mount in turn.
      const given = value;
      const under = [...volumes].filter(([mountPath]) => given === mountPath || given.startsWith(`${mountPath}/`)).sort((a, b) => b[0].length - a[0].length)[0];
      env[variable.name] = under ? under[1] + given.slice(under[0].length) : given;
    }
    return env;
  }

  function onContainerExit(sandbox: Sandbox, container: Container, code: number | null, signal: NodeJS.Signals | null): void {
    container.stopProbes.splice(0).forEach((stop) => stop());
    container.ready = false;
    // A container runtime reports death by signal as 128 + the signal's number.
    const exitCode = code ?? 128 + (signal ? os.constants.signals[signal] : 0);
    container.exit = { exitCode, ...(signal ? { signal } : {}), finishedAt: now() };
    // The container's init died: the kernel kills the rest of its pid namespace.
    void killPodProcesses(sandbox, container.pid).finally(() => kubelet.queue.add(sandbox.key));
  }

  /** SIGTERM to the main process, SIGKILL to all of the container's processes after the grace period. */
  async function killContainer(sandbox: Sandbox, container: Container, graceMs: number): Promise<void> {
    const pid = container.pid;
    if (!pid || container.exit) return;
    if (graceMs > 0 && isProcessAlive(pid)) {
      // Only the main process, as a container runtime signals only the container's init.
      try {
        process.kill(pid, 'SIGTERM');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
      const deadline = Date.now() + graceMs;
      while (!container.exit && Date.now() < deadline) await sleep(25);
    }
    await killPodProcesses(sandbox, pid);
    // Its exit event, so the status that follows reports it terminated.
    const deadline = Date.now() + 5_000;
    while (!container.exit && Date.now() < deadline) await sleep(10);
  }

  /** SIGKILLs the group of `pid` and every group whose command line names the sandbox dir. */
  async function killPodProcesses(sandbox: Sandbox, pid?: number): Promise<void> {
    const groups = new Set([...(pid ? [pid] : []), ...(await processGroupsMentioning(sandbox.dir))]);
    for (const group of groups) if ((await processGroupMembers(group)).length > 0) signalProcessGroup(group, 'SIGKILL');
    await Promise.all([...groups].map((group) => waitForProcessGroupExit(group, 5_000)));
  }

  async function finalise(pod: V1Pod, sandbox: Sandbox | undefined): Promise<void> {
    if (sandbox) {
      const graceSeconds = pod.metadata?.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
      await Promise.all(sandbox.containers.map((container) => killContainer(sandbox, container, graceSeconds * 1000)));
      await writeStatus(pod, sandbox).catch((error: unknown) => {
        // 404: force-deleted while its containers were being killed; nobody to tell.
        if (statusOf(error) !== 404) log.warn({ pod: sandbox.key, err: error }, 'could not write the final status');
      });
      await removeSandbox(sandbox, 0);
    }
    try {
      // In the body: with a body, the API server ignores the query's gracePeriodSeconds.
      await core.deleteNamespacedPod({ name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata!.uid } } });
    } catch (error) {
      if (statusOf(error) !== 404 && statusOf(error) !== 409) throw error;
    }
  }

  async function removeSandbox(sandbox: Sandbox, graceMs: number): Promise<void> {
    await Promise.all(sandbox.containers.map((container) => killContainer(sandbox, container, graceMs)));
    await killPodProcesses(sandbox);
    await rm(sandbox.dir, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 });
    usedAddresses.delete(sandbox.ip);
    if (sandboxes.get(sandbox.key) === sandbox) sandboxes.delete(sandbox.key);
  }

  async function writeStatus(pod: V1Pod, sandbox: Sandbox): Promise<void> {
    const status = await podStatus(pod, sandbox);
    const body = JSON.stringify(status);
    if (body === sandbox.lastWritten) return;
    await core.patchNamespacedPodStatus(
      { name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    sandbox.lastWritten = body;
  }

  /** The status a kubelet would report for the sandbox now. */
  async function podStatus(pod: V1Pod, sandbox: Sandbox): Promise<Record<string, unknown>> {
    const { containers } = sandbox;
    const exited = containers.filter((c) => c.exit);
    const phase =
      exited.length === containers.length
        ? exited.some((c) => c.exit!.exitCode !== 0)
          ? 'Failed'
          : 'Succeeded'
        : containers.some((c) => c.child && !c.exit)
          ? 'Running'
          : 'Pending';
    const unready = containers.filter((c) => !c.ready).map((c) => c.spec.name);
    const notReady = TERMINAL.has(phase)
      ? { status: 'False', reason: 'PodCompleted' }
      : unready.length
        ? { status: 'False', reason: 'ContainersNotReady', message: `containers with unready status: [${unready.join(' ')}]` }
        : { status: 'True' };
    const condition = (type: string, fields: { status: string; reason?: string; message?: string }) => {
      const previous = sandbox.transitions.get(type);
      if (previous?.status !== fields.status) sandbox.transitions.set(type, { status: fields.status, at: now() });
      return { type, ...fields, lastProbeTime: null, lastTransitionTime: sandbox.transitions.get(type)!.at };
    };
    const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
    return {
      phase,
      hostIP: '127.0.0.1',
      hostIPs: [{ ip: '127.0.0.1' }],
      podIP: sandbox.ip,
      podIPs: [{ ip: sandbox.ip }],
      startTime: sandbox.startTime,
      qosClass: pod.status?.qosClass,
      conditions: [
        condition('PodReadyToStartContainers', { status: TERMINAL.has(phase) ? 'False' : 'True' }),
        condition('Initialized', { status: 'True' }),
        condition('Ready', notReady),
        condition('ContainersReady', notReady),
        ...(scheduled ? [{ ...scheduled, lastTransitionTime: new Date(scheduled.lastTransitionTime ?? Date.now()).toISOString().replace(/\.\d{3}Z$/, 'Z') }] : []),
      ],
      containerStatuses: await Promise.all(containers.map((c) => containerStatus(sandbox, c))),
    };
  }

  async function containerStatus(sandbox: Sandbox, container: Container): Promise<Record<string, unknown>> {
    const { spec, exit } = container;
    let state: Record<string, unknown>;
    if (exit) {
      const reason = exit.startError ? 'StartError' : exit.exitCode === 0 ? 'Completed' : 'Error';
      const message = exit.startError ?? container.killedFor ?? (exit.exitCode !== 0 && spec.terminationMessagePolicy === 'FallbackToLogsOnError' ? await logTail(sandbox.logFile) : undefined);
      state = { terminated: { exitCode: exit.exitCode, reason, ...(message ? { message } : {}), startedAt: container.startedAt ?? null, finishedAt: exit.finishedAt, containerID: `nodeagent://${container.pid}` } };
    } else if (container.child) state = { running: { startedAt: container.startedAt } };
    else state = { waiting: container.waiting ?? { reason: 'ContainerCreating' } };
    return {
      name: spec.name,
      image: spec.image,
      imageID: spec.image,
      ...(container.pid ? { containerID: `nodeagent://${container.pid}` } : {}),
      ready: container.ready,
      started: Boolean(container.child && !exit),
      restartCount: 0,
      state,
      lastState: {},
    };
  }

  const running = [scheduler, kubelet].map((controller) =>
    controller.run(stopping.signal).catch((error: unknown) => log.warn({ node: nodeName, err: error }, 'node agent controller stopped')),
  );
  return {
    nodeName,
    sandboxDir: (namespace, name) => sandboxes.get(`${namespace}/${name}`)?.dir,
    containers: (namespace, name) =>
      (sandboxes.get(`${namespace}/${name}`)?.containers ?? []).filter((c) => c.pid && !c.exit).map((c) => ({ name: c.spec.name, pid: c.pid! })),
    async stop() {
      stopping.abort();
      stopLease();
      // Killed first, so reconciles waiting out a grace period end now; then again for
      // any sandbox a reconcile in flight created meanwhile.
      await Promise.all([...sandboxes.values()].map((sandbox) => removeSandbox(sandbox, 0)));
      await Promise.all(running);
      await Promise.all([...sandboxes.values()].map((sandbox) => removeSandbox(sandbox, 0)));
      await rm(root, { recursive: true, force: true });
      await core.deleteNode({ name: nodeName }).catch(() => undefined);
      await config.makeApiClient(CoordinationV1Api).deleteNamespacedLease({ name: nodeName, namespace: 'kube-node-lease' }).catch(() => undefined);
    },
  };
}

function nodeLabels(nodeName: string): Record<string, string> {
  return { 'kubernetes.io/hostname': nodeName, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': os.arch() === 'x64' ? 'amd64' : os.arch(), 'browserplane.dev/test-node': 'true' };
}

/** Creates (or takes over) the Node and reports it Ready with the machine's capacity. */
async function registerNode(core: CoreV1Api, nodeName: string, placement: NodePlacement): Promise<void> {
  try {
    await core.createNode({ body: { metadata: { name: nodeName, labels: placement.labels }, spec: { taints: placement.taints } } });
  } catch (error) {
    if (statusOf(error) !== 409) throw error;
    // Taken over from an earlier agent of the same name: the node this test asked for.
    await core.patchNode({ name: nodeName, body: { metadata: { labels: placement.labels }, spec: { taints: placement.taints } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  }
  const capacity = { cpu: String(os.cpus().length), memory: `${Math.floor(os.totalmem() / 1024)}Ki`, pods: '110' };
  const at = now();
  const healthy = (type: string, reason: string) => ({ type, status: 'False', reason, message: `kubelet has no ${type.replace('Pressure', '').toLowerCase()} pressure`, lastHeartbeatTime: at, lastTransitionTime: at });
  await core.patchNodeStatus(
    {
      name: nodeName,
      body: {
        status: {
          capacity,
          allocatable: capacity,
          conditions: [
            healthy('MemoryPressure', 'KubeletHasSufficientMemory'),
            healthy('DiskPressure', 'KubeletHasNoDiskPressure'),
            healthy('PIDPressure', 'KubeletHasSufficientPID'),
            { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status', lastHeartbeatTime: at, lastTransitionTime: at },
          ],
          addresses: [
            { type: 'InternalIP', address: '127.0.0.1' },
            { type: 'Hostname', address: nodeName },
          ],
          daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
          nodeInfo: {
            machineID: nodeName,
            systemUUID: nodeName,
            bootID: nodeName,
            kernelVersion: os.release(),
            osImage: 'browserplane test node agent',
            containerRuntimeVersion: `nodeagent://${process.version}`,
            kubeletVersion: 'v0.0.0-nodeagent',
            kubeProxyVersion: '',
            operatingSystem: 'linux',
            architecture: nodeLabels(nodeName)['kubernetes.io/arch'],
          },
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** The node's heartbeat: a Lease in kube-node-lease owned by the Node, renewed every `renewMs`. */
async function keepNodeLease(config: KubeConfig, nodeName: string, renewMs: number, log: ControllerLog): Promise<() => void> {
  const leases = config.makeApiClient(CoordinationV1Api);
  const node = await config.makeApiClient(CoreV1Api).readNode({ name: nodeName });
  const namespace = 'kube-node-lease';
  const spec = () => ({ holderIdentity: nodeName, leaseDurationSeconds: 40, renewTime: new V1MicroTime() });
  try {
    await leases.createNamespacedLease({
      namespace,
      body: {
        metadata: { name: nodeName, namespace, ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid: node.metadata!.uid! }] },
        spec: spec(),
      },
    });
  } catch (error) {
    if (statusOf(error) !== 409) throw error;
  }
  const renew = async () => {
    try {
      await leases.patchNamespacedLease({ name: nodeName, namespace, body: { spec: spec() } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    } catch (error) {
      log.warn({ node: nodeName, err: error }, 'could not renew the node lease');
    }
  };
  await renew();
  const timer = setInterval(() => void renew(), renewMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** $(VAR) expands to an earlier variable; $$( escapes; unknown references stay as written. */
function expand(value: string, env: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => (name === undefined ? '$' : (env[name] ?? match)));
}

function fieldValue(pod: V1Pod, podIP: string, fieldPath: string): string {
  const keyed = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (keyed) return pod.metadata?.[keyed[1] as 'labels' | 'annotations']?.[keyed[2]!] ?? '';
  const fields: Record<string, string | undefined> = {
    'metadata.name': pod.metadata?.name,
    'metadata.namespace': pod.metadata?.namespace,
    'metadata.uid': pod.metadata?.uid,
    'spec.nodeName': pod.spec?.nodeName,
    'spec.serviceAccountName': pod.spec?.serviceAccountName,
    'status.podIP': podIP,
    'status.hostIP': '127.0.0.1',
  };
  if (!(fieldPath in fields)) throw new ConfigError('CreateContainerConfigError', `fieldRef ${fieldPath} is not supported by the node agent`);
  return fields[fieldPath] ?? '';
}

/** The kubelet's FallbackToLogsOnError message: the log's last 80 lines or 2 KiB. */
async function logTail(logFile: string): Promise<string | undefined> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  const tail = text.trimEnd().split('\n').slice(-80).join('\n').slice(-2048);
  return tail || undefined;
}

/**
 * Runs a probe at its period (httpGet or tcpSocket, on the pod's address) and reports
 * each flip across its thresholds. Readiness starts failed, liveness succeeded, as in the
 * kubelet. Returns the function that stops it.
 */
function runProbe(probe: V1Probe, podIP: string, ports: Map<string, number>, initial: boolean, onFlip: (ok: boolean) => void): () => void {
  const portOf = (port: number | string | undefined) => (typeof port === 'number' ? port : /^\d+$/.test(port ?? '') ? Number(port) : ports.get(port ?? ''));
  const timeoutMs = 1000 * (probe.timeoutSeconds ?? 1);
  const check = async (): Promise<boolean> => {
    if (probe.httpGet) {
      const host = probe.httpGet.host ?? podIP;
      const scheme = (probe.httpGet.scheme ?? 'HTTP').toLowerCase();
      try {
        const response = await fetch(`${scheme}://${host}:${portOf(probe.httpGet.port)}${probe.httpGet.path ?? '/'}`, { signal: AbortSignal.timeout(timeoutMs) });
        await response.body?.cancel();
        return response.status >= 200 && response.status < 400;
      } catch {
        return false;
      }
    }
    if (probe.tcpSocket) {
      return new Promise((resolve) => {
        const socket = net.connect({ host: probe.tcpSocket!.host ?? podIP, port: portOf(probe.tcpSocket!.port) ?? 0, timeout: timeoutMs });
        const done = (ok: boolean) => {
          socket.destroy();
          resolve(ok);
        };
        socket.once('connect', () => done(true));
        socket.once('error', () => done(false));
        socket.once('timeout', () => done(false));
      });
    }
    // exec and grpc probes have nothing to run against here.
    return false;
  };
  let ok = initial;
  let streak = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const tick = async () => {
    const result = await check();
    if (stopped) return;
    streak = result === ok ? 0 : streak + 1;
    if (streak >= (result ? (probe.successThreshold ?? 1) : (probe.failureThreshold ?? 3))) {
      ok = result;
      streak = 0;
      onFlip(ok);
    }
    timer = setTimeout(() => void tick(), 1000 * (probe.periodSeconds ?? 10));
    timer.unref();
  };
  timer = setTimeout(() => void tick(), 1000 * (probe.initialDelaySeconds ?? 0));
  timer.unref();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
