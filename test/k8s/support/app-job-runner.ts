import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { REPO_ROOT } from '../../support/service.js';

/**
 * STAND-IN for the Job controller and kubelet of app Jobs (this tier has a real
 * kube-apiserver but no kubelet; test/cluster/apps.test.ts runs the same Jobs as real pods
 * of the runner image): polls the namespace's app Jobs and runs each one's container as a
 * local process — the pod program from dist/ with the Job's args and env, its secretKeyRef
 * read from the Job's Secret, one work dir standing in for every pod's /work (so a
 * build's venv paths hold in its runs, as they do at /work in every real pod) whose build
 * tree is removed when a Job's process exits: each run extracts its bundle afresh.
 * Jobs whose args match `skip` are left pending (never run), as an unschedulable pod would be.
 */
export const POD_PROGRAM = path.join(REPO_ROOT, 'dist/api/src/modules/apps/pod/job-main.js');

export interface AppJobRunner {
  /** Jobs it started, by name, with their process's exit once it exited. */
  runs: Map<string, { job: V1Job; exit?: number | null; output: string[] }>;
  stop(): Promise<void>;
}

export function startAppJobRunner(options: { config: KubeConfig; namespace: string; workRoot: string; skip?: (args: string[]) => boolean }): AppJobRunner {
  const batch = options.config.makeApiClient(BatchV1Api);
  const core = options.config.makeApiClient(CoreV1Api);
  const runs: AppJobRunner['runs'] = new Map();
  const children = new Set<ChildProcess>();
  let stopped = false;

  const secretValue = async (name: string, key: string): Promise<string> => {
    for (let attempt = 0; attempt < 100; attempt++) {
      const secret = await core.readNamespacedSecret({ name, namespace: options.namespace }).catch(() => undefined);
      const value = secret?.data?.[key];
      if (value) return Buffer.from(value, 'base64').toString('utf8');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`secret ${name} has no ${key}`);
  };

  const run = async (job: V1Job) => {
    const name = job.metadata!.name!;
    const container = job.spec!.template.spec!.containers[0]!;
    const args = container.args ?? [];
    const record: { job: V1Job; exit?: number | null; output: string[] } = { job, output: [] };
    runs.set(name, record);
    if (options.skip?.(args)) return;
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', BROWSERPLANE_APP_SANDBOX: 'pod' };
    for (const entry of container.env ?? []) {
      if (entry.value !== undefined) env[entry.name] = entry.value;
      else if (entry.valueFrom?.secretKeyRef) env[entry.name] = await secretValue(entry.valueFrom.secretKeyRef.name!, entry.valueFrom.secretKeyRef.key);
    }
    const work = path.join(options.workRoot, 'work');
    const tmp = path.join(options.workRoot, 'tmp', name);
    await mkdir(path.join(work, 'home'), { recursive: true });
    await mkdir(tmp, { recursive: true });
    Object.assign(env, { BROWSERPLANE_APP_WORK_DIR: work, HOME: path.join(work, 'home'), TMPDIR: tmp });
    const deploymentId = job.metadata!.annotations!['browserplane.dev/deployment-id']!;
    const child = spawn(process.execPath, [POD_PROGRAM, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.stdout.on('data', (chunk: Buffer) => record.output.push(chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => record.output.push(chunk.toString()));
    child.on('exit', (code) => {
      children.delete(child);
      // The pod and its emptyDir are gone with the Job's end.
      void rm(path.join(work, 'apps', 'builds', deploymentId), { recursive: true, force: true }).finally(() => (record.exit = code));
    });
  };

  const loop = (async () => {
    while (!stopped) {
      const jobs = await batch.listNamespacedJob({ namespace: options.namespace, labelSelector: 'app.kubernetes.io/name=browserplane-app' }).catch(() => undefined);
      for (const job of jobs?.items ?? []) {
        if (!runs.has(job.metadata!.name!) && !job.metadata!.deletionTimestamp) await run(job).catch((error: unknown) => console.error('app job runner:', error));
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();

  return {
    runs,
    async stop() {
      stopped = true;
      await loop;
      for (const child of children) child.kill('SIGKILL');
    },
  };
}
