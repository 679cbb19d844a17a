/**
 * Telling "Postgres is not there" apart from "Postgres refused this query". The first is
 * an outage (a restart, a crash, a network cut): the request says so with 503 and a
 * Retry-After instead of an internal error, and readiness fails alongside.
 */

/** SQLSTATEs of a server that is shutting down, starting up, out of slots, or a broken link. */
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown: fast shutdown terminated the session
  '57P02', // crash_shutdown: another backend crashed, every session is reset
  '57P03', // cannot_connect_now: starting up or in recovery
  '53300', // too_many_connections
  '57014', // query_canceled: DATABASE_QUERY_TIMEOUT_MS (statement_timeout) ran out
  '08000',
  '08001',
  '08003',
  '08004',
  '08006', // connection exceptions
]);

/** Socket errors of a connection that could not be made or was cut. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** What node-postgres says (as plain Errors, no code) when a connection ends under it or cannot be had. */
const DRIVER_MESSAGES = [
  /^Connection terminated/,
  /^timeout exceeded when trying to connect$/,
  /is not queryable$/,
  /^Query read timeout$/,
];

/** Failures that happened before anything reached the server: a retry cannot apply a write twice. */
const NEVER_SENT_SQLSTATES = new Set(['57P03', '53300', '08001', '08004']);
const NEVER_SENT_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

export interface DatabaseUnavailable {
  /** True when the request's statements cannot have reached the server (refused connection, server starting up). */
  neverSent: boolean;
}

/** Whether `error` (or an error in its cause chain) means the database was unreachable; undefined otherwise. */
export function databaseUnavailable(error: unknown): DatabaseUnavailable | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    const code = (current as { code?: unknown }).code;
    // Socket codes count only on the error itself, as pg-pool throws them: deeper in a
    // cause chain they are some other connection's (fetch wraps the agent's ECONNRESET).
    if (typeof code === 'string' && (UNAVAILABLE_SQLSTATES.has(code) || (depth === 0 && NETWORK_CODES.has(code)))) {
      return { neverSent: NEVER_SENT_SQLSTATES.has(code) || NEVER_SENT_CODES.has(code) };
    }
    if (DRIVER_MESSAGES.some((pattern) => pattern.test(current.message))) {
      return { neverSent: current.message === 'timeout exceeded when trying to connect' };
    }
  }
  return undefined;
}
