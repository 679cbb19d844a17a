import { BuildError, type InspectApps } from './build.js';

/**
 * The build's last step reads the apps an entrypoint registers through the runner
 * (runner.ts, built beside this module). Until it is merged in, a build stops here with
 * a clear reason rather than guessing at the registry.
 */
export const inspectApps: InspectApps = () => Promise.reject(new BuildError('reading the app registry needs the runner (runner.ts), which this build does not have yet'));
