import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { AppDeps } from '../../app-deps.js';
import { AppError, notFound } from '../../http/errors.js';
import { extractArchive, UnsafeArchiveError } from '../../../../lib/profile-archive.js';
import { refOf } from '../profiles/service.js';
import type { Queryable } from '../../db/pool.js';
import { conflict } from '../../http/errors.js';
import type { LiveBrowserSettings } from '../../../../contract/browser-runtime.js';
import { findLiveProfileById, findProfile, markProfileSaved, markProfileUsed, type ProfileRow } from '../profiles/store.js';
import { createCdpTokens, type CdpTokens, type TokenCheck } from './cdp-token.js';
import { findLiveSessionById, type Scope, type SessionRow } from './store.js';

/**
 * How a session's profile reaches its browser and comes back: the agent GETs the stored
 * profile as a tar before Chromium starts and PUTs the user-data dir back when the session
 * ends with save_changes. Over HTTP from the service, so the same agent code works as a
 * child process here and as a pod later. The agent has no API key: the URL's token
 * (purpose "profile", bound to the session) is the whole authorisation, and it is honoured
 * only while the session is live, for that session's own profile.
 */

export const PROFILE_ARCHIVE_PATH = '/internal/browsers/{session_id}/profile';

/** The archive URL handed to the agent in its launch spec. */
export async function profileArchiveUrl(deps: Pick<AppDeps, 'settings'>, tokens: CdpTokens, sessionId: string): Promise<string> {
  const base = deps.settings.internalUrl;
  if (!base) {
    throw new AppError(503, 'profile_transfer_unavailable', 'This service cannot hand profiles to its browsers: its internal address is not known yet', {
      shouldRetry: false,
    });
  }
  const { token } = await tokens.issue(sessionId, 'profile');
  return `${base.replace(/\/+$/, '')}/internal/browsers/${encodeURIComponent(sessionId)}/profile?token=${token}`;
}

const REFUSALS: Record<Exclude<TokenCheck, 'ok'>, [number, string, string]> = {
  malformed: [401, 'unauthorized', 'The token is missing or malformed'],
  expired: [401, 'unauthorized', 'The token has expired'],
  bad_signature: [403, 'forbidden', 'The token is not valid for this session’s profile'],
};

/**
 * The live session the token speaks for and its live profile, or the refusal. Writing
 * also needs save_changes on that session: a reader's token cannot overwrite the profile.
 */
export async function authorizeArchiveAccess(
  deps: Pick<AppDeps, 'db'>,
  tokens: CdpTokens,
  request: { sessionId: string; token: string | undefined; access: 'read' | 'write' },
): Promise<{ session: SessionRow; profile: ProfileRow }> {
  const check = await tokens.verify(request.sessionId, request.token ?? '', 'profile');
  if (check !== 'ok') throw new AppError(...REFUSALS[check]);
  const session = await findLiveSessionById(deps.db, request.sessionId);
  if (!session) throw new AppError(404, 'browser_not_found', 'The browser session has ended or does not exist');
  if (session.profile_id === null) throw new AppError(404, 'profile_not_attached', 'The browser session has no profile');
  if (request.access === 'write' && !session.profile_save_changes) {
    throw new AppError(403, 'profile_read_only', 'The browser session loaded its profile without save_changes; it may not write it back');
  }
  const profile = await findLiveProfileById(deps.db, session.profile_id);
  if (!profile) throw notFound('Profile', session.profile_id);
  return { session, profile };
}

/**
 * Stores an uploaded user-data dir as the profile's new content. The archive is checked
 * entry by entry into a scratch directory first (no absolute paths, no "..", no links
 * leaving it, no devices, size caps); one bad entry refuses all of it and nothing is
 * stored. Then the store swaps it in atomically, and updated_at moves.
 */
export async function saveUploadedProfile(deps: AppDeps, profile: ProfileRow, body: Readable): Promise<{ sizeBytes: number; updatedAt: Date }> {
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'browserplane-profile-upload-'));
  try {
    try {
      await extractArchive(body, scratch);
    } catch (error) {
      if (!(error instanceof UnsafeArchiveError)) throw error;
      const details = [{ code: error.reason, message: error.message }];
      if (error.reason === 'too_large') throw new AppError(413, 'profile_archive_too_large', `The profile archive is too large: ${error.message}`, { details });
      throw new AppError(400, 'invalid_profile_archive', `The profile archive was refused: ${error.message}`, { details });
    }
    const ref = refOf(profile);
    const { sizeBytes } = await deps.profileStore.saveFrom(ref, scratch);
    const now = deps.clock.now();
    if (!(await markProfileSaved(deps.db, profile.id, now))) {
      // Deleted while the upload ran: its files must not outlive it.
      await deps.profileStore.delete(ref);
      throw notFound('Profile', profile.id);
    }
    return { sizeBytes, updatedAt: now };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * PATCH profile on a session that has none. Chromium reads its user-data dir only at
 * start, so a running browser cannot honestly take a profile that holds saved data
 * (cookies pushed in over CDP would be part of it, without local storage, IndexedDB or
 * logins): that is a 409, and the caller starts a new session with the profile instead. A
 * profile with nothing saved yet is attached as it is; with save_changes the browser
 * saves into it when it ends, exactly as if it had been created with it.
 */
export async function attachProfile(
  deps: AppDeps,
  tx: Queryable,
  request: { scope: Scope; session: SessionRow; selector: { id?: string | undefined; name?: string | undefined; save_changes?: boolean | undefined }; now: Date },
): Promise<{ change: { id: string; saveChanges: boolean }; live?: LiveBrowserSettings['profile'] }> {
  const { session, selector } = request;
  if (session.profile_id !== null) throw conflict('profile_already_loaded', 'The session already has a profile; only a session without one can load one');
  const key = (selector.id ?? selector.name)!;
  const profile = await findProfile(tx, request.scope, key);
  if (!profile) throw notFound('Profile', key);
  if (await deps.profileStore.has(refOf(profile))) {
    throw conflict(
      'profile_not_loadable',
      `Profile ${JSON.stringify(key)} holds saved browser data, which a running browser cannot load; create a new session with it`,
    );
  }
  const saveChanges = selector.save_changes === true;
  await markProfileUsed(tx, profile.id, request.now);
  if (!saveChanges) return { change: { id: profile.id, saveChanges } };
  const archiveUrl = await profileArchiveUrl(deps, createCdpTokens(deps), session.id);
  return { change: { id: profile.id, saveChanges }, live: { id: profile.id, archiveUrl, saveChanges } };
}
