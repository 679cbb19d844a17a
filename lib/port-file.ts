import { rename, writeFile } from 'node:fs/promises';

/**
 * Tells whoever started this agent which port it listens on: written to a temporary name
 * and renamed, so a reader sees either no file or the whole number.
 */
export async function reportPort(file: string, port: number): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${port}\n`, { mode: 0o600 });
  await rename(temporary, file);
}

/** The port in a file written by reportPort; undefined while there is none yet. */
export function parsePort(text: string): number | undefined {
  const port = Number(text.trim());
  return Number.isInteger(port) && port > 0 && port < 65536 ? port : undefined;
}
