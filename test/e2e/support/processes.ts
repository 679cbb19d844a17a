import { readdir, readFile } from 'node:fs/promises';

/** Pids of processes whose command line mentions `dir` (Chromium, Xvfb and helpers of one browser). */
export async function processesMentioning(dir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(dir)) pids.push(Number(entry));
  }
  return pids;
}
