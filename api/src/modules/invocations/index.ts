/** The invocations module's facade: its module descriptor (routes, project resources) and its service. */
export { invocationsModule } from './module.js';
export * from './service.js';
export { stopInvocationsOfDeployment, failInterruptedRuns, stopAllRuns, DEFAULT_RUN_TIMEOUT_SECONDS, SYNC_WAIT_MS, INTERRUPTED_BY_RESTART } from './runs.js';
