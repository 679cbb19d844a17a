import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { packageRoot } from './paths.js';

/** What the command line asks for: start the process, or print something and exit with a code. */
export type CliAction = { kind: 'run' } | { kind: 'print'; stream: 'stdout' | 'stderr'; text: string; exitCode: number };

export interface CliSpec {
  /** The program's name in messages, e.g. 'browserplane'. */
  program: string;
  /** The full help text (its first line is the usage line). */
  help: () => string;
  version: () => string;
}

/**
 * Reads the command line. Configuration comes from the environment only, so the one
 * thing an argument may do is ask for help or the version: anything else is a mistake
 * (a flag meant for another tool, a typo) and is refused with the usage rather than
 * ignored, since a service started with a setting it silently dropped is worse than none.
 */
export function parseCliArgs(args: readonly string[], spec: CliSpec): CliAction {
  if (args.includes('--help') || args.includes('-h')) return { kind: 'print', stream: 'stdout', text: spec.help(), exitCode: 0 };
  if (args.includes('--version') || args.includes('-V')) return { kind: 'print', stream: 'stdout', text: spec.version(), exitCode: 0 };
  const unknown = args[0];
  if (unknown === undefined) return { kind: 'run' };
  const usage = spec.help().split('\n')[0] ?? '';
  const what = unknown.startsWith('-') ? 'unknown option' : 'unexpected argument';
  const text = `${spec.program}: ${what} ${JSON.stringify(unknown)} (settings come from the environment; see --help)\n${usage}`;
  return { kind: 'print', stream: 'stderr', text, exitCode: 2 };
}

/** The version in package.json, read where the code runs (a checkout or the image's /app). */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(path.join(packageRoot(), 'package.json'), 'utf8')) as { version?: unknown };
  return typeof manifest.version === 'string' ? manifest.version : 'unknown';
}

/** Carries out a print action; returns whether the process should go on to run. */
export function applyCliArgs(args: readonly string[], spec: CliSpec): boolean {
  const action = parseCliArgs(args, spec);
  if (action.kind === 'run') return true;
  (action.stream === 'stdout' ? process.stdout : process.stderr).write(action.text + '\n');
  process.exitCode = action.exitCode;
  return false;
}

/** One entry per variable of an environment schema: its name, default and description. */
export function describeVariables(schema: z.ZodObject): string[] {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, { default?: unknown }> };
  const lines: string[] = [];
  for (const [name, field] of Object.entries(schema.shape)) {
    const def = json.properties?.[name]?.default;
    const shownDefault = def === undefined ? '(unset)' : typeof def === 'string' ? def : JSON.stringify(def);
    lines.push(`  ${name.padEnd(42)} default: ${shownDefault}`);
    lines.push(`  ${''.padEnd(42)} ${(field as z.ZodType).description ?? ''}`);
  }
  return lines;
}
