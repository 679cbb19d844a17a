import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/**
 * zstd compression as a stream, through the reference `zstd` command (Debian's `zstd`
 * package). Node 20's zlib has no zstd, and the npm options either compress whole
 * buffers only (the WASM builds) or fetch native binaries from outside the registry at
 * install time; the command streams with bounded memory, honours back-pressure through
 * its pipes and writes one standard frame any decoder reads.
 */
export interface ZstdOptions {
  /** The command to run (default `zstd`, found on PATH). */
  command?: string;
  /** Compression level (default 3, zstd's own default). */
  level?: number;
}

/** Thrown when the zstd command cannot be started (not installed, not executable). */
export class ZstdUnavailableError extends Error {
  override readonly name = 'ZstdUnavailableError';
}

/**
 * Starts zstd on `source` and returns its output. Resolves only once the process runs, so
 * a missing command is reported before anything is sent. The output stream fails (rather
 * than ending cleanly) when zstd or the source fails, so a truncated archive is never
 * mistaken for a whole one; destroying it stops zstd and the source.
 */
export async function compressZstd(source: Readable, options: ZstdOptions = {}): Promise<Readable> {
  const command = options.command ?? 'zstd';
  const child = spawn(command, [`-${options.level ?? 3}`, '-q', '-c', '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const closed = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
  closed.catch(() => undefined);
  try {
    await once(child, 'spawn');
  } catch (error) {
    source.destroy();
    throw new ZstdUnavailableError(`cannot run ${command}: ${(error as Error).message}`, { cause: error });
  }
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr = (stderr + text).slice(-2000)));
  let inputError: Error | undefined;
  const fed = pipeline(source, child.stdin).catch((error: unknown) => {
    inputError = error instanceof Error ? error : new Error(String(error));
    child.kill();
  });

  async function* output(): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of child.stdout) yield chunk as Buffer;
      const [code, signal] = await closed;
      await fed;
      if (inputError) throw inputError;
      if (code !== 0) throw new Error(`${command} failed (${signal ?? `exit ${code}`}): ${stderr.trim()}`);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill();
      source.destroy();
    }
  }
  return Readable.from(output());
}
