import type { Informer, KubernetesObject } from '@kubernetes/client-node';

export interface RestartBackoff {
  initial: number;
  max: number;
}

/** client-go's reflector backs off from about a second up to half a minute. */
export const WATCH_RESTART_BACKOFF: RestartBackoff = { initial: 1_000, max: 30_000 };

/**
 * Keeps an informer watching. client-node resumes a watch the server closes (and relists
 * on 410 Gone) by itself, but one that *fails* (connection refused, 5xx, a list that
 * errors) emits 'error' and stops for good: this restarts it after a backoff that doubles
 * per failure and starts over once a watch connects.
 */
export function keepInformerRunning<T extends KubernetesObject>(
  informer: Informer<T>,
  options: {
    stopped: () => boolean;
    onFailure: (error: unknown, retryInMs: number) => void;
    backoff?: RestartBackoff;
  },
): void {
  const backoff = options.backoff ?? WATCH_RESTART_BACKOFF;
  let failures = 0;
  informer.on('connect', () => {
    failures = 0;
  });
  informer.on('error', (error: unknown) => {
    if (options.stopped()) return;
    const wait = Math.min(backoff.initial * 2 ** failures++, backoff.max);
    options.onFailure(error, wait);
    setTimeout(() => {
      if (!options.stopped()) void informer.start().catch(() => undefined);
    }, wait).unref();
  });
}
