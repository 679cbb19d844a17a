import type { TelemetryEvent } from '../../../contract/telemetry.js';

/** Events about the agent's CDP capture itself (category monitor), in the SDK's shapes. */

type MonitorData = {
  monitor_init_failed: { step: string };
  monitor_disconnected: { reason: 'chrome_restarted' };
  monitor_reconnected: { reconnect_duration_ms: number };
  monitor_reconnect_failed: { reason: 'reconnect_exhausted' };
};

export function monitorEvent<T extends keyof MonitorData>(type: T, data: MonitorData[T]): Omit<TelemetryEvent, 'ts'> {
  return { category: 'monitor', type, source: { kind: 'local_process', event: 'cdp_monitor' }, data };
}
