import type { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { DEFAULT_REPLAY_SETTINGS, type ReplaySettings } from '../../config-replays.js';
import { inTransaction } from '../../db/pool.js';
import { AppError, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import type { ProjectScope } from '../../scope.js';
import { agentEndpoint, agentFetch } from '../../../../contract/agent-client.js';
import { agentReplayStoppedSchema, type AgentReplayStart } from '../../../../contract/replay-wire.js';
import { createCdpTokens, getSession } from '../browsers/index.js';
import { DEFAULT_FRAMERATE, type replayStartBody } from './schema.js';
import { countRecording, findSessionReplay, insertReplay, listSessionReplays, markEnded, type ReplayRow } from './store.js';

/**
 * The rules of browsers.replays: a live session records (headful: its display, headless:
 * its page's screencast, agent/src/replay); a recording's row outlives its session, so
 * list and download read sessions that have ended too.
 */

/** A start, and the agent's answer to a stop, which waits for the upload. */
const AGENT_START_TIMEOUT_MS = 30_000;
const AGENT_STOP_TIMEOUT_MS = 150_000;
/** The agent's answers that pass with their status: the recording is unknown there, the browser is busy or not ready. */
const PASSED = new Set([404, 409, 429, 503]);

export const settingsOf = (deps: Pick<AppDeps, 'settings'>): ReplaySettings => deps.settings.replays ?? DEFAULT_REPLAY_SETTINGS;

export async function startReplay(deps: AppDeps, scope: ProjectScope, idOrName: string, body: z.infer<typeof replayStartBody>): Promise<ReplayRow> {
  const limits = settingsOf(deps);
  if (body.record_audio === true) throw new AppError(400, 'audio_not_supported', 'Browsers here have no audio device: record_audio must be false or left out');
  const maxDuration = body.max_duration_in_seconds ?? limits.maxDurationS;
  if (maxDuration > limits.maxDurationS) {
    throw new AppError(400, 'invalid_request', `max_duration_in_seconds may be at most ${limits.maxDurationS}`, {
      details: [{ code: 'too_big', field: 'max_duration_in_seconds', message: `at most ${limits.maxDurationS}` }],
    });
  }
  const session = await getSession(deps.db, scope, idOrName);
  if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
  const internalUrl = deps.settings.internalUrl;
  if (!internalUrl) throw new AppError(503, 'replays_unavailable', 'This service cannot take recordings from its browsers: its internal address is not known yet');
  const now = deps.clock.now();
  const row: ReplayRow = {
    id: newId('rpl'),
    session_id: session.id,
    org_id: scope.orgId,
    project_id: scope.projectId,
    status: 'recording',
    framerate: body.framerate ?? DEFAULT_FRAMERATE,
    max_duration_s: maxDuration,
    started_at: now,
    finished_at: null,
    size_bytes: null,
    failure: null,
    expires_at: new Date(now.getTime() + limits.retentionDays * 86_400_000),
  };
  await inTransaction(deps.db, async (tx) => {
    // One start at a time per session, so two cannot both see room for one more.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`replays:${session.id}`]);
    if ((await countRecording(tx, session.id)) >= limits.maxConcurrent) {
      throw new AppError(409, 'replay_limit_reached', `This browser already runs ${limits.maxConcurrent} recordings, the most at once; stop one first`, { shouldRetry: false });
    }
    await insertReplay(tx, row);
  });
  const { token } = await createCdpTokens(deps).issue(row.id, 'replay');
  const request: AgentReplayStart = {
    replay_id: row.id,
    framerate: row.framerate,
    max_duration_s: maxDuration,
    max_bytes: limits.maxBytes,
    width: session.viewport_width,
    height: session.viewport_height,
    upload_url: `${internalUrl.replace(/\/+$/, '')}/internal/replays/${row.id}/video?token=${token}`,
  };
  try {
    await callAgent(deps, session, '/replays', request, AGENT_START_TIMEOUT_MS);
  } catch (error) {
    await markEnded(deps.db, row.id, { status: 'failed', at: deps.clock.now(), failure: (error as Error).message });
    throw error;
  }
  return row;
}

/** Stops a recording and answers once its video is stored (or the recording failed). */
export async function stopReplay(deps: AppDeps, scope: ProjectScope, idOrName: string, replayId: string): Promise<void> {
  const session = await getSession(deps.db, scope, idOrName, true);
  const row = await findSessionReplay(deps.db, { ...scope, sessionId: session.id }, replayId);
  if (!row) throw notFound('Replay', replayId);
  // Kernel answers a stop of a stopped recording with 400 "no active recording to stop".
  if (row.status !== 'recording') throw new AppError(400, 'replay_not_recording', `Replay ${JSON.stringify(replayId)} is not recording (it is ${row.status})`);
  if (session.deleted_at !== null || !session.agent_url) {
    throw new AppError(409, 'replay_ending', 'The browser session has ended; its recording is being finished', { shouldRetry: false });
  }
  await finishOnAgent(deps, session, row.id);
}

/** Asks the browser to finish the recording and hand its video over; records a failure it reports. */
export async function finishOnAgent(deps: AppDeps, session: { id: string; agent_url: string | null }, replayId: string, timeoutMs = AGENT_STOP_TIMEOUT_MS): Promise<void> {
  const answer = agentReplayStoppedSchema.parse(
    await callAgent(deps, session, `/replays/${encodeURIComponent(replayId)}/stop`, undefined, timeoutMs).catch((error: unknown) => {
      // The browser does not know it (its agent was replaced): no video will ever come.
      if (error instanceof AppError && error.code === 'replay_not_found') return { replay_id: replayId, status: 'failed', message: error.message };
      throw error;
    }),
  );
  // The side door recorded the outcome already; a failure the agent could not report is recorded here.
  if (answer.status === 'failed') await markEnded(deps.db, replayId, { status: 'failed', at: deps.clock.now(), failure: answer.message ?? 'the recording failed' });
}

export async function listReplays(deps: AppDeps, scope: ProjectScope, idOrName: string): Promise<ReplayRow[]> {
  const session = await getSession(deps.db, scope, idOrName, true);
  return listSessionReplays(deps.db, { ...scope, sessionId: session.id });
}

/** The finished recording's row; 409 while it records, 409 when it failed. */
export async function finishedReplay(deps: AppDeps, scope: ProjectScope, idOrName: string, replayId: string): Promise<ReplayRow> {
  const session = await getSession(deps.db, scope, idOrName, true);
  const row = await findSessionReplay(deps.db, { ...scope, sessionId: session.id }, replayId);
  if (!row) throw notFound('Replay', replayId);
  if (row.status === 'recording') throw new AppError(409, 'replay_in_progress', 'The recording is still running: stop it first, then download it', { shouldRetry: false });
  if (row.status === 'failed') throw new AppError(409, 'replay_failed', `The recording failed and has no video: ${row.failure ?? 'unknown reason'}`, { shouldRetry: false });
  return row;
}

async function callAgent(deps: AppDeps, session: { id: string; agent_url: string | null }, path: string, body: unknown, timeoutMs: number): Promise<unknown> {
  const agent = agentEndpoint(deps.agentTokens, session.id, session.agent_url!);
  let response: Response;
  let text: string;
  try {
    response = await agentFetch(agent, path, {
      method: 'POST',
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await response.text();
  } catch (error) {
    throw new AppError(502, 'browser_unavailable', 'The browser did not answer', { cause: error });
  }
  let parsed: { code?: unknown; message?: unknown } = {};
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    // not JSON: reported with the status alone
  }
  if (response.ok) return parsed;
  const message = typeof parsed.message === 'string' ? parsed.message : `The browser answered ${response.status}`;
  const passed = PASSED.has(response.status) && typeof parsed.code === 'string';
  throw new AppError(passed ? response.status : 502, passed ? (parsed.code as string) : 'replay_failed', message, { shouldRetry: response.status === 503 });
}
