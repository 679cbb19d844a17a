/**
 * The API's facade for the operator: the composition (configuration, dependencies, the
 * custom-resource runtime) and the shared kernel (errors, ids, logging). The operator
 * imports this and the module facades (modules/<m>/index.ts), nothing else of api/ —
 * eslint.config.js enforces it.
 */
export type { AppDeps } from './app-deps.js';
export { composeAppDeps } from './compose.js';
export { applyCliArgs, describeVariables, packageVersion } from './cli.js';
export { signalPolicy } from './shutdown-signals.js';
export { agentFsEnv, browserFsLimitFields, databaseTimeouts, parseConfig, type Config } from './config.js';
export { decodeKey, loadEncryptionKey } from './crypto/sealer.js';
export { createPool, type Db, type Queryable } from './db/pool.js';
export type { AuthContext } from './http/auth-context.js';
export { OPERATOR_ACTOR, type Actor, type OrgScope, type ProjectScope } from './scope.js';
export { AppError } from './http/errors.js';
export { installOutboundDispatcher } from './http/outbound.js';
export { foldName } from './ids.js';
export { createLogger } from './logger.js';
export { packageRoot } from './paths.js';
export { createCustomResourceRuntime } from './runtime/custom-resource-runtime.js';
