/** Session recordings' facade. */
export { replaysModule } from './module.js';
export { startReplaySweep, sweepReplays, REPLAY_SWEEP_INTERVAL_MS } from './sweep.js';
export { finishLiveRecordings } from './service-stop.js';
