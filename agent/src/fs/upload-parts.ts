import { FsError } from './errors.js';

/**
 * The names an upload's parts arrive under. The SDKs spell the array of {dest_path, file}
 * four ways:
 *
 *   files[0][dest_path], files[0][file]   @onkernel/sdk (TS)
 *   files[][dest_path], files[][file]     Python SDK (qs "brackets"): no index; the fields
 *                                         are sent first, then the files (httpx), so the
 *                                         k-th dest_path goes with the k-th file
 *   files.0.dest_path, files.0.file       Go SDK ("indices:dots")
 *   files.dest_path, files.file           older Go SDK ("comma"): no index either; each
 *                                         element is written dest_path then file (its
 *                                         fields sorted by name)
 *
 * One request uses one spelling: a request mixing them, or a part named files… in none
 * of them, is refused (400) before anything of it is written, rather than half read.
 */

export type UploadField = 'dest_path' | 'file';
type Spelling = 'brackets' | 'empty-brackets' | 'dots' | 'unindexed';

const SPELLINGS: Array<{ spelling: Spelling; pattern: RegExp }> = [
  { spelling: 'brackets', pattern: /^files\[(\d{1,6})\]\[(dest_path|file)\]$/ },
  { spelling: 'empty-brackets', pattern: /^files\[\]()\[(dest_path|file)\]$/ },
  { spelling: 'dots', pattern: /^files\.(\d{1,6})\.(dest_path|file)$/ },
  { spelling: 'unindexed', pattern: /^files\.()(dest_path|file)$/ },
];

const EXPECTED = 'files[i][dest_path] and files[i][file] (or files.i.dest_path and files.i.file)';
const UNINDEXED: Spelling[] = ['empty-brackets', 'unindexed'];

const refused = (message: string) => new FsError(400, 'invalid_request', message);

/** Reads one request's part names in arrival order; one per request. */
export class UploadPartNames {
  private spelling: Spelling | undefined;
  private readonly unindexedSeen: Record<UploadField, number> = { dest_path: 0, file: 0 };

  /**
   * Which file of the upload a part belongs to (`pair`, the same for its dest_path and its
   * file), or undefined for a part that is no upload part (not named files…).
   * `isFile` says whether the part came as a file (with a filename) or as a plain field.
   */
  pairOf(name: string, isFile: boolean): { pair: string; field: UploadField } | undefined {
    if (name !== 'files' && !name.startsWith('files[') && !name.startsWith('files.')) return undefined;
    const found = SPELLINGS.map(({ spelling, pattern }) => ({ spelling, match: pattern.exec(name) })).find(({ match }) => match);
    if (!found?.match) throw refused(`unrecognized upload part "${name.slice(0, 100)}": send ${EXPECTED}`);
    if (this.spelling !== undefined && found.spelling !== this.spelling) {
      throw refused(`upload part "${name.slice(0, 100)}" is spelled unlike the parts before it: use one of files[i][…], files[][…], files.i.… or files.… throughout`);
    }
    this.spelling = found.spelling;
    const field = found.match[2] as UploadField;
    if (field === 'file' && !isFile) throw refused(`"${name}" must be a file part (with a filename), not a plain field`);
    if (field === 'dest_path' && isFile) throw refused(`"${name}" must be a plain field holding the path, not a file part`);
    // Leading zeros name the same index: "01" is 1.
    const pair = UNINDEXED.includes(found.spelling) ? `#${this.unindexedSeen[field]++}` : String(Number(found.match[1]));
    return { pair, field };
  }

  /** How a pair is named in messages, in the spelling the client used. */
  describe(pair: string, field: UploadField): string {
    if (this.spelling === 'dots') return `files.${pair}.${field}`;
    if (this.spelling === 'unindexed') return `files.${field} #${Number(pair.slice(1)) + 1}`;
    if (this.spelling === 'empty-brackets') return `files[][${field}] #${Number(pair.slice(1)) + 1}`;
    return `files[${pair}][${field}]`;
  }
}

export const NO_UPLOAD_PARTS = `no upload parts: send ${EXPECTED}`;
