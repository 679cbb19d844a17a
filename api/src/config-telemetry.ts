import { z } from 'zod';

/** Settings of browser telemetry (docs/telemetry.md), spread into config.ts's schema. */
export const telemetryFields = {
  BROWSERPLANE_TELEMETRY_RETENTION_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(8760)
    .default(72)
    .describe('How long browser telemetry events are kept after they arrive (hours); the sweep removes older ones, ended sessions included'),
  BROWSERPLANE_TELEMETRY_MAX_EVENTS_PER_SESSION: z.coerce
    .number()
    .int()
    .min(100)
    .max(10_000_000)
    .default(20_000)
    .describe('Telemetry events kept per browser session; past it the oldest are removed as new ones arrive'),
};

export interface TelemetrySettings {
  retentionHours: number;
  maxEventsPerSession: number;
}

export const DEFAULT_TELEMETRY_SETTINGS: TelemetrySettings = { retentionHours: 72, maxEventsPerSession: 20_000 };

export function telemetrySettingsOf(config: { BROWSERPLANE_TELEMETRY_RETENTION_HOURS: number; BROWSERPLANE_TELEMETRY_MAX_EVENTS_PER_SESSION: number }): TelemetrySettings {
  return { retentionHours: config.BROWSERPLANE_TELEMETRY_RETENTION_HOURS, maxEventsPerSession: config.BROWSERPLANE_TELEMETRY_MAX_EVENTS_PER_SESSION };
}
