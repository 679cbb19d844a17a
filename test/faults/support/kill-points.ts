import { watch } from 'node:fs';
import path from 'node:path';
import type { RunningService } from '../../support/service.js';

/**
 * SIGKILLs the service the instant a file whose name matches `pattern` appears in its
 * runtime's state dir (<data>/browsers), through inotify: the narrowest kill point a test
 * can reach from outside, a few event-loop turns of the service after the file's rename.
 * Resolves with the file name once the service has exited.
 */
export async function killWhenStateFileAppears(service: RunningService, pattern: RegExp): Promise<string> {
  let seen = '';
  const watcher = watch(path.join(service.dataDir, 'browsers'), (_event, file) => {
    if (seen || !file || !pattern.test(file)) return;
    seen = file;
    try {
      process.kill(service.pid, 'SIGKILL');
    } catch {
      // exited already
    }
  });
  try {
    await service.exited;
  } finally {
    watcher.close();
  }
  if (!seen) throw new Error(`the service exited before a file matching ${pattern} appeared in its state dir`);
  return seen;
}
