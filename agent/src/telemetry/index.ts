import type { Logger } from 'pino';
import type { TelemetrySpec } from '../../../contract/telemetry.js';
import type { CdpMux } from '../cdp/mux.js';
import { CdpCapture } from './cdp-capture.js';
import { telemetry } from './sink.js';

/**
 * The agent's telemetry, as agent.ts drives it: configured from the launch spec once
 * Chromium runs, reconfigured by POST /settings, told when Chromium crashes, flushed on
 * the way out. The CDP capture is reopened whenever the set of CDP-backed categories
 * changes, so it never holds a domain enabled that no category needs.
 */

let capture: CdpCapture | undefined;
let captureKey = '';
let mux: (() => CdpMux | undefined) | undefined;
let log: Logger | undefined;
let chain: Promise<void> = Promise.resolve();

export function startTelemetry(spec: TelemetrySpec | undefined, cdp: () => CdpMux | undefined, logger: Logger): Promise<void> {
  mux = cdp;
  log = logger.child({ component: 'telemetry' });
  telemetry.log = log;
  return updateTelemetry(spec);
}

/** Applies a new configuration (an absent one stops capture); capture failures are logged, never thrown. */
export function updateTelemetry(spec: TelemetrySpec | undefined): Promise<void> {
  telemetry.configure(spec);
  chain = chain.then(() => reconcileCapture());
  return chain;
}

/** Chromium was restarted (extensions loaded): the capture reopens on the new CDP connection. */
export function reattachTelemetry(): Promise<void> {
  capture?.close();
  capture = undefined;
  captureKey = '';
  chain = chain.then(() => reconcileCapture());
  return chain;
}

async function reconcileCapture(): Promise<void> {
  const domains = CdpCapture.needed((category) => telemetry.enabled(category));
  const key = [...domains].sort().join(',');
  if (key === captureKey && capture) return;
  capture?.close();
  capture = undefined;
  captureKey = key;
  const current = mux?.();
  if (domains.size === 0 || !current || !log) return;
  try {
    capture = await CdpCapture.start(current, telemetry, domains, log);
  } catch (error) {
    captureKey = '';
    log.warn({ err: error }, 'telemetry: the CDP capture could not start');
  }
}

/**
 * For the agent's way out: a service_crashed event (system) when Chromium died on its own
 * (`crashedPid`), then capture stops and what is queued is sent (bounded by `timeoutMs`).
 */
export async function endTelemetry(crashedPid?: number, timeoutMs = 3000): Promise<void> {
  if (crashedPid !== undefined) {
    telemetry.emit({ category: 'system', type: 'service_crashed', source: { kind: 'local_process', event: 'chromium_exit' }, data: { service_name: 'chromium', phase: 'running', pid: crashedPid } });
  }
  capture?.close();
  capture = undefined;
  await telemetry.flush(timeoutMs);
}
