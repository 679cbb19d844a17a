import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { AppError } from '../../http/errors.js';
import { authenticateAppJob, type AppJobGrant, type AppJobTokenKind } from './job-tokens.js';

/**
 * Pieces of the internal wire app Jobs speak (docs/apps.md, "Kubernetes mode"): the
 * token check, the log batch and the result bodies, shared by the build routes (apps) and
 * the run routes (invocations).
 */
export const INTERNAL_APP_JOBS = '/internal/app-jobs';
export const internalTags = ['Internal'];

/** Most lines in one log batch, and the longest line (Kernel's log lines go to 64 KiB). */
export const MAX_LOG_LINES = 500;
export const MAX_LINE_CHARS = 64 * 1024;
/** The JSON body limit of these routes (app.ts mounts a parser with it): a run's output goes to 16 MiB. */
export const INTERNAL_APP_JOBS_MAX_BODY_BYTES = 20 * 1024 * 1024;

export const logBatchSchema = z
  .object({
    lines: z
      .array(z.object({ stream: z.enum(['stdout', 'stderr']), message: z.string().max(MAX_LINE_CHARS), timestamp: z.string().max(64).optional() }).strict())
      .max(MAX_LOG_LINES),
  })
  .strict();

export const runResultSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), output: z.string().max(16 * 1024 * 1024).nullable() }).strict(),
  z.object({ ok: z.literal(false), error: z.string().min(1).max(64 * 1024) }).strict(),
]);

/** The request's job token, for routes of `kind`. */
export function jobGrant(deps: AppDeps, req: Request, kind: AppJobTokenKind): Promise<AppJobGrant> {
  return authenticateAppJob(deps.db, req.headers.authorization, kind, deps.clock.now());
}

/** The grant of either kind (the log route serves builds and runs). */
export async function anyJobGrant(deps: AppDeps, req: Request): Promise<AppJobGrant> {
  try {
    return await jobGrant(deps, req, 'build');
  } catch (error) {
    if (!(error instanceof AppError) || error.status !== 401) throw error;
    return jobGrant(deps, req, 'run');
  }
}

export const subjectEnded = (what: string) => new AppError(409, 'job_subject_ended', `${what} has ended: this Job has nothing more to do`);

/** Streams a blob out; a failure mid-stream cuts the connection (the pod sees a short body). */
export async function sendStream(res: Response, blob: Readable, log: { warn: (o: object, m: string) => void }, contentType: string): Promise<void> {
  res.status(200);
  res.setHeader('Content-Type', contentType);
  res.setHeader('Cache-Control', 'no-store');
  try {
    await pipeline(blob, res);
  } catch (error) {
    log.warn({ err: error }, 'sending an app blob failed mid-stream');
    res.destroy();
  }
}
