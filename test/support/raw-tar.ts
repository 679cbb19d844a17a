import { Header } from 'tar';

export interface RawEntry {
  path: string;
  type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link' | 'FIFO' | 'CharacterDevice';
  body?: string;
  linkpath?: string;
  mode?: number;
}

/** A tar written header by header, so it can hold what no well-behaved packer writes. */
export function rawTar(entries: RawEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const body = Buffer.from(entry.body ?? '');
    const type = entry.type ?? 'File';
    const header = new Header({
      path: entry.path,
      type,
      size: type === 'File' ? body.length : 0,
      mode: entry.mode ?? (type === 'Directory' ? 0o755 : 0o644),
      uid: 0,
      gid: 0,
      mtime: new Date(),
      ...(entry.linkpath !== undefined ? { linkpath: entry.linkpath } : {}),
    });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    blocks.push(block);
    if (type === 'File' && body.length > 0) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
