import { z } from 'zod';
import { browserIdParams } from './schema.js';

/** Shapes of CONTRACT.md §2.2 (browsers.fs). */

export const fsPath = z.string().regex(/^\/.*/, 'must be an absolute path (start with "/")').describe('Absolute path inside the browser filesystem');
/** Permission bits only: setuid, setgid and sticky (a leading digit other than 0) are refused here and by the agent. */
const mode = z.string().regex(/^0?[0-7]{3}$/, 'must be 3 octal digits (or 4 with a leading 0), e.g. 644; setuid, setgid and sticky bits are not allowed');

export const pathQuery = z.object({ path: fsPath });
export const writeFileQuery = z.object({
  path: fsPath,
  mode: mode.default('644').describe('Octal permission bits of the file, default 644'),
});
export const pathBody = z.strictObject({ path: fsPath });
export const createDirectoryBody = z.strictObject({
  path: fsPath,
  mode: mode.default('755').describe('Octal permission bits of new directories, default 755'),
});
export const moveBody = z.strictObject({ src_path: fsPath.describe('What to move'), dest_path: fsPath.describe('Where to') });
export const setFilePermissionsBody = z.strictObject({
  path: fsPath,
  mode: mode.describe('Octal permission bits, e.g. 644'),
  owner: z.string().min(1).max(64).optional().describe("User name or UID: only the browser's own user"),
  group: z.string().min(1).max(64).optional().describe("Group name or GID: only the browser's own group"),
});
export const watchBody = z.strictObject({
  path: fsPath.describe('Directory to watch'),
  recursive: z.boolean().optional().describe('Also watch subdirectories'),
});
export const watchParams = browserIdParams.extend({ watch_id: z.string().regex(/^[A-Za-z0-9-]{1,64}$/).describe('Watch id from POST /fs/watch') });

export const fileInfoSchema = z.object({
  name: z.string().describe('Base name'),
  path: z.string().describe('Absolute path'),
  is_dir: z.boolean(),
  size_bytes: z.number().describe('0 for directories'),
  mode: z.string().describe('Symbolic mode, e.g. -rw-r--r--'),
  mod_time: z.string().describe('Last modification, RFC 3339'),
});
export const watchStartedSchema = z.object({ watch_id: z.string().optional() });
export const binary = z.string().describe('Raw bytes');
