/** Browser sessions' facade. */
export { browsersModule } from './module.js';
export { terminateGraceMs } from './service.js';
export { createBrowserBody, DEFAULT_VIEWPORT } from './schema.js';
export { applyTelemetry, type TelemetryConfig } from './telemetry.js';
export { getSession } from './service.js';
export { createCdpTokens, type CdpTokens, type TokenCheck } from './cdp-token.js';
export { browserIdParams } from './schema.js';
export { TELEMETRY_INGEST_PATH } from './telemetry-door.js';
export { publicWsBase } from './present.js';
