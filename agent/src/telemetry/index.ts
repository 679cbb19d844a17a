import type { Logger } from 'pino';
import type { TelemetrySpec } from '../../../contract/telemetry.js';
import type { CdpMux } from '../cdp/mux.js';
import { CaptureStartError, CdpCapture } from './cdp-capture.js';
import { monitorEvent } from './monitor-events.js';
import { locateOomCounter, OomWatch } from './oom-watch.js';
import { telemetry } from './sink.js';

/**
 * The agent's telemetry, as agent.ts drives it: configured from the launch spec once
 * Chromium runs, reconfigured by POST /settings, told when Chromium crashes, flushed on
 * the way out. The CDP capture is reopened whenever the set of CDP-backed categories
 * changes, so it never holds a domain enabled that no category needs.
 *
 * Monitor events (category monitor, on with any CDP-backed category) say what happened to
 * the capture itself: monitor_init_failed when it cannot start, and around a Chromium
 * restart monitor_disconnected, then monitor_reconnected, or monitor_reconnect_failed
 * after RECONNECT_ATTEMPTS tries.
 */

export const RECONNECT_ATTEMPTS = 3;
const RECONNECT_DELAY_MS = 500;

let capture: CdpCapture | undefined;
let captureKey = '';
let mux: (() => CdpMux | undefined) | undefined;
let log: Logger | undefined;
let chain: Promise<void> = Promise.resolve();
let oomWatch: OomWatch | undefined;

export function startTelemetry(spec: TelemetrySpec | undefined, cdp: () => CdpMux | undefined, logger: Logger): Promise<void> {
  mux = cdp;
  log = logger.child({ component: 'telemetry' });
  telemetry.log = log;
  // Once per agent, from Chromium's start: the runtime has put the agent in its cgroup by then.
  const counter = oomWatch ? undefined : locateOomCounter();
  if (counter) {
    const warn = log.warn.bind(log);
    oomWatch = new OomWatch(counter, (event) => telemetry.emit(event), (message) => warn(message));
    oomWatch.start();
  }
  return updateTelemetry(spec);
}

/** Applies a new configuration (an absent one stops capture); capture failures are logged, never thrown. */
export function updateTelemetry(spec: TelemetrySpec | undefined): Promise<void> {
  telemetry.configure(spec);
  chain = chain.then(async () => void (await reconcileCapture()));
  return chain;
}

/** Chromium was restarted (extensions loaded): the capture reopens on the new CDP connection. */
export function reattachTelemetry(): Promise<void> {
  const wasCapturing = capture !== undefined;
  capture?.close();
  capture = undefined;
  captureKey = '';
  const started = Date.now();
  if (wasCapturing) telemetry.emit(monitorEvent('monitor_disconnected', { reason: 'chrome_restarted' }));
  chain = chain.then(async () => void (wasCapturing ? await reconnect(started) : await reconcileCapture()));
  return chain;
}

async function reconnect(started: number): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    const failed = await reconcileCapture({ reportFailure: false });
    if (failed === undefined) {
      if (capture) telemetry.emit(monitorEvent('monitor_reconnected', { reconnect_duration_ms: Date.now() - started }));
      return;
    }
    if (attempt >= RECONNECT_ATTEMPTS) {
      telemetry.emit(monitorEvent('monitor_reconnect_failed', { reason: 'reconnect_exhausted' }));
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAY_MS * attempt));
  }
}

/** Opens the capture the categories need; the step that failed, if it could not. */
async function reconcileCapture({ reportFailure } = { reportFailure: true }): Promise<string | undefined> {
  const domains = CdpCapture.needed((category) => telemetry.enabled(category));
  const key = [...domains].sort().join(',');
  if (key === captureKey && capture) return undefined;
  capture?.close();
  capture = undefined;
  captureKey = key;
  const current = mux?.();
  if (domains.size === 0 || !log) return undefined;
  try {
    if (!current) throw new CaptureStartError('connect', new Error('Chromium is not running'));
    capture = await CdpCapture.start(current, telemetry, domains, log);
    return undefined;
  } catch (error) {
    captureKey = '';
    const step = error instanceof CaptureStartError ? error.step : 'start';
    log.warn({ err: error, step }, 'telemetry: the CDP capture could not start');
    if (reportFailure) telemetry.emit(monitorEvent('monitor_init_failed', { step }));
    return step;
  }
}

/**
 * For the agent's way out: a service_crashed event (system) when Chromium died on its own
 * (`crashedPid`), then capture stops and what is queued is sent (bounded by `timeoutMs`).
 */
export async function endTelemetry(crashedPid?: number, timeoutMs = 3000): Promise<void> {
  // Chromium's own death may have been the kernel's doing: that report goes first.
  oomWatch?.check();
  oomWatch?.stop();
  if (crashedPid !== undefined) {
    telemetry.emit({ category: 'system', type: 'service_crashed', source: { kind: 'local_process', event: 'chromium_exit' }, data: { service_name: 'chromium', phase: 'running', pid: crashedPid } });
  }
  capture?.close();
  capture = undefined;
  await telemetry.flush(timeoutMs);
}
