/**
 * The API's hands on app Jobs (app-jobs.ts makes their specs): start one with its token
 * Secret, cancel one, and hear how each ends. Every replica runs one watch over every app
 * Job of the namespace, not only the ones it started, and reports each finished or vanished
 * Job, so a replica that dies mid-run leaves its Jobs to the others; a watch that starts
 * (a new replica, a restart) reports the Jobs that ended while nobody watched from its
 * first list. Outcomes repeat (updates after the end, relists, every replica): the
 * consumer must finish a run idempotently (a conditional update of its row).
 */
import { BatchV1Api, CoreV1Api, makeInformer, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { keepInformerRunning } from '../../../../lib/informer-restart.js';
import { apiErrorCode } from '../../../../lib/k8s-errors.js';
import { APP_JOB_LABELS, appJobOutcome, appJobSecret, type AppJobOutcome } from './app-jobs.js';

export type FinishedOutcome = Exclude<AppJobOutcome, { state: 'pending' }>;

export interface AppJobClient {
  /** Creates the Job, then its token Secret owned by it; if the Secret cannot be made the Job is deleted and the error thrown. */
  start(job: V1Job, token: string): Promise<V1Job>;
  /** Deletes a Job (its pod and Secret go with it); an absent one is not an error. */
  cancel(name: string): Promise<void>;
  /** Resolves once the first list is in (every Job that already ended has been reported). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface AppJobClientOptions {
  config: KubeConfig;
  namespace: string;
  onOutcome: (job: V1Job, outcome: FinishedOutcome) => void;
  log: { warn: (fields: object, message: string) => void; error: (fields: object, message: string) => void };
}

const SELECTOR = `app.kubernetes.io/name=${APP_JOB_LABELS['app.kubernetes.io/name']}`;

export function createAppJobClient(options: AppJobClientOptions): AppJobClient {
  const { config, namespace, onOutcome, log } = options;
  const batch = config.makeApiClient(BatchV1Api);
  const core = config.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Job>(
    config,
    `/apis/batch/v1/namespaces/${namespace}/jobs`,
    () => batch.listNamespacedJob({ namespace, labelSelector: SELECTOR }),
    SELECTOR,
  );
  const report = (job: V1Job, outcome: AppJobOutcome) => {
    if (outcome.state === 'pending') return;
    try {
      onOutcome(job, outcome);
    } catch (error) {
      log.error({ err: error, job: job.metadata?.name }, 'handling an app Job outcome failed');
    }
  };
  informer.on('add', (job) => report(job, appJobOutcome(job)));
  informer.on('update', (job) => report(job, appJobOutcome(job)));
  // Gone: how it ended if it had, else deleted before it finished.
  informer.on('delete', (job) => {
    const ended = appJobOutcome(job);
    report(job, ended.state === 'pending' ? appJobOutcome(undefined) : ended);
  });
  let closed = false;
  keepInformerRunning(informer, {
    stopped: () => closed,
    onFailure: (error, retryInMs) => log.warn({ err: error, retryInMs }, 'app Job watch failed; restarting'),
  });
  const started = informer.start();
  started.catch((error: unknown) => log.error({ err: error }, 'listing app Jobs failed'));

  const cancel = async (name: string) => {
    await batch.deleteNamespacedJob({ name, namespace, propagationPolicy: 'Background' }).catch((error: unknown) => {
      if (apiErrorCode(error) !== 404) throw error;
    });
  };

  return {
    async start(job, token) {
      const created = await batch.createNamespacedJob({ namespace, body: job });
      try {
        await core.createNamespacedSecret({ namespace, body: appJobSecret(created, token, { uid: created.metadata!.uid! }) });
      } catch (error) {
        await cancel(created.metadata!.name!).catch((cleanup: unknown) => log.warn({ err: cleanup, job: created.metadata?.name }, 'deleting an app Job without its Secret failed'));
        throw error;
      }
      return created;
    },
    cancel,
    ready: () => started,
    async close() {
      closed = true;
      await informer.stop();
    },
  };
}
