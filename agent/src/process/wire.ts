import { z } from 'zod';

/**
 * The bodies of /process/* as the service forwards them (the service checks them first,
 * api/src/modules/browsers/process-schema.ts; the agent checks again, as the boundary).
 */

const noNul = (what: string) => z.string().refine((value) => !value.includes('\0'), `${what} must not contain NUL`);

export const commandFields = {
  command: noNul('command').pipe(z.string().min(1).max(4096)),
  args: z.array(noNul('an argument').pipe(z.string().max(128 * 1024))).max(4096).optional(),
  as_root: z.boolean().optional(),
  as_user: z.string().max(256).nullable().optional(),
  cwd: noNul('cwd').pipe(z.string().max(4096).regex(/^\//, 'cwd must be an absolute path')).nullable().optional(),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, 'an environment variable name is letters, digits and _, not starting with a digit'), noNul('an environment value'))
    .refine((env) => Object.keys(env).length <= 256, 'at most 256 environment variables')
    .optional(),
  timeout_sec: z.number().positive().max(7 * 24 * 3600).nullable().optional(),
};

export const execBody = z.strictObject(commandFields);
const terminalSize = z.number().int().min(1).max(1000);
export const spawnBody = z.strictObject({ ...commandFields, allocate_tty: z.boolean().optional(), cols: terminalSize.optional(), rows: terminalSize.optional() });
export const stdinBody = z.strictObject({ data_b64: z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'data_b64 must be base64') });
export const killBody = z.strictObject({ signal: z.enum(['TERM', 'KILL', 'INT', 'HUP']) });
export const resizeBody = z.strictObject({ cols: terminalSize, rows: terminalSize });

export type ExecBody = z.infer<typeof execBody>;
export type SpawnBody = z.infer<typeof spawnBody>;

/** Arguments and environment together: what one launch may put on its command line. */
export const MAX_ARGV_BYTES = 256 * 1024;
