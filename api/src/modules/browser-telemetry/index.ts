/** Browser telemetry's facade. */
export { browserTelemetryModule } from './module.js';
export { appendEvents, telemetryChannel } from './service.js';
export { recordBrowserApiCalls } from './api-calls.js';
