import { BuildError, type InspectApps } from './build.js';
import { inspectApps as readRegistry } from './runner.js';

/**
 * The build's last step: the runner (runner.ts) loads the entry in the sandbox and reads
 * the registry. Its failure (the entry throws, registers nothing readable, times out) is
 * the app's, so it becomes the deployment's status_reason rather than an internal error.
 */
export const inspectApps: InspectApps = async (opts) => {
  try {
    return await readRegistry(opts);
  } catch (error) {
    if (opts.signal?.aborted) throw error;
    throw new BuildError(error instanceof Error ? error.message : String(error));
  }
};
