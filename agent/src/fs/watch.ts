import { randomUUID } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { lstat, realpath } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import { canonicalPath, isInside, toVirtual, virtualComponents } from './confine.js';
import { FsError } from './errors.js';
import type { SessionRoot } from './session-root.js';

/**
 * fs.watch: recursive watching is native on Linux since Node 19.1 (inotify per
 * directory, done by Node itself), so no chokidar. inotify tells Node only "rename" or
 * "change": a "rename" of a path that exists is a CREATE, of one that is gone a DELETE,
 * a "change" is a WRITE. A move therefore shows as DELETE + CREATE; RENAME is never sent
 * (Node does not expose IN_MOVED_FROM/TO cookies).
 */

export interface WatchEvent {
  type: 'CREATE' | 'WRITE' | 'DELETE' | 'RENAME';
  path: string;
  name?: string;
  is_dir?: boolean;
}

const BUFFERED_EVENTS = 1000;

interface Watch {
  watcher: FSWatcher;
  buffered: WatchEvent[];
  clients: Set<ServerResponse>;
}

export class Watches {
  private readonly watches = new Map<string, Watch>();

  async start(root: SessionRoot, virtualPath: string, recursive: boolean): Promise<string> {
    const dir = await root.openDir(virtualComponents(virtualPath));
    const hostDir = dir.hostPath;
    await dir.close();
    const id = randomUUID();
    const watch_: Watch = { watcher: watch(hostDir, { recursive }), buffered: [], clients: new Set() };
    watch_.watcher.on('change', (kind, filename) => {
      if (typeof filename !== 'string') return;
      void toEvent(root, hostDir, kind, filename).then((event) => event && this.publish(watch_, event));
    });
    // Stopped once: a second 'error' (the recursive watcher has one watcher per directory)
    // must not throw the 404 of an unknown watch out of an event listener, which would be
    // an uncaught exception and end the agent.
    watch_.watcher.on('error', () => {
      if (this.watches.get(id) === watch_) this.stop(id);
    });
    this.watches.set(id, watch_);
    return id;
  }

  /** SSE: what happened since the start (up to 1000 events), then live events. */
  stream(id: string, response: ServerResponse): void {
    const watch_ = this.get(id);
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    // The head goes out now and the first bytes of the body are the first real event: no
    // comment frame (": watching") first. The Go SDK (0.28 and older) dispatches a block with no
    // data line as an event with empty data, which fails to decode and ends its stream
    // (docs/wire-compatibility.md); a lone `retry:` block does the same.
    response.flushHeaders();
    for (const event of watch_.buffered.splice(0)) response.write(frame(event));
    watch_.clients.add(response);
    response.on('close', () => watch_.clients.delete(response));
    response.on('error', () => watch_.clients.delete(response));
  }

  stop(id: string): void {
    const watch_ = this.get(id);
    watch_.watcher.close();
    for (const client of watch_.clients) client.end();
    watch_.clients.clear();
    this.watches.delete(id);
  }

  stopAll(): void {
    for (const id of [...this.watches.keys()]) this.stop(id);
  }

  private get(id: string): Watch {
    const watch_ = this.watches.get(id);
    if (!watch_) throw new FsError(404, 'not_found', `no watch ${id}`);
    return watch_;
  }

  private publish(watch_: Watch, event: WatchEvent): void {
    if (watch_.clients.size === 0) {
      watch_.buffered.push(event);
      if (watch_.buffered.length > BUFFERED_EVENTS) watch_.buffered.shift();
      return;
    }
    // An event still in flight when its watch stopped: a write after end() would be an
    // 'error' on the response, uncaught.
    for (const client of watch_.clients) if (!client.writableEnded) client.write(frame(event));
  }
}

const frame = (event: WatchEvent) => `data: ${JSON.stringify(event)}\n\n`;

/** An event under the root, or undefined for one whose real parent lies outside it. */
async function toEvent(root: SessionRoot, hostDir: string, kind: string, filename: string): Promise<WatchEvent | undefined> {
  const hostPath = path.join(hostDir, filename);
  const virtual = toVirtual(root.hostRoot, hostPath);
  if (!virtual) return undefined;
  const parent = await realpath(path.dirname(hostPath)).catch(() => undefined);
  if (parent && !isInside(root.hostRoot, parent)) return undefined;
  const info = await lstat(hostPath).catch(() => undefined);
  const type = kind === 'change' ? 'WRITE' : info ? 'CREATE' : 'DELETE';
  return { type, path: canonicalPath(virtual), name: path.basename(hostPath), ...(info ? { is_dir: info.isDirectory() } : {}) };
}
