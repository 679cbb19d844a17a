/**
 * The agent's fs errors carry the HTTP status and code the API passes on unchanged, so a
 * missing file is 404 not_found and an escape attempt is 400 invalid_path at both hops.
 */
export class FsError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const invalidPath = (message: string) => new FsError(400, 'invalid_path', message);
export const escapeRefused = (virtualPath: string, why: string) => new FsError(400, 'invalid_path', `${virtualPath}: ${why}`);
export const notFound = (virtualPath: string) => new FsError(404, 'not_found', `${virtualPath} does not exist`);
export const nameTooLong = (virtualPath: string) =>
  new FsError(400, 'name_too_long', `${virtualPath}: a path component is longer than 255 bytes, or the path is too long`);
/** A malformed zip (not a zip, a bad header, an entry that inflates past the size it declares): the client's 400. */
export const invalidZip = (message: string) => new FsError(400, 'invalid_zip', message);
/** A limit the request would pass (quota, zip size): 413, so clients do not retry it as they would a 5xx. */
export const tooLarge = (code: string, message: string) => new FsError(413, code, message);

/**
 * Maps errno codes from fs calls to the one error body: what the client's path or request
 * caused is a 4xx with a code; anything else stays a 500.
 */
export function fromErrno(error: unknown, virtualPath: string): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return notFound(virtualPath);
    case 'ELOOP':
      return escapeRefused(virtualPath, 'is a symbolic link; links are not followed here');
    case 'EEXIST':
      return new FsError(409, 'already_exists', `${virtualPath} already exists`);
    case 'ENOTEMPTY':
      return new FsError(409, 'directory_not_empty', `${virtualPath} is a non-empty directory`);
    case 'ENOTDIR':
      return new FsError(400, 'not_a_directory', `a component of ${virtualPath} is not a directory`);
    case 'EISDIR':
      return new FsError(400, 'is_a_directory', `${virtualPath} is a directory`);
    case 'ENXIO':
      return new FsError(400, 'invalid_path', `${virtualPath} is not a regular file or directory`);
    case 'EACCES':
    case 'EPERM':
      return new FsError(403, 'permission_denied', `${virtualPath}: permission denied`);
    case 'EXDEV':
      return escapeRefused(virtualPath, 'crosses a file system boundary');
    case 'ENAMETOOLONG':
      return nameTooLong(virtualPath);
    case 'EINVAL':
      return new FsError(400, 'invalid_path', `${virtualPath}: invalid argument for this operation`);
    case 'EMLINK':
      return new FsError(409, 'too_many_links', `${virtualPath}: too many links or subdirectories`);
    case 'EBUSY':
    case 'ETXTBSY':
      return new FsError(409, 'busy', `${virtualPath} is in use`);
    case 'EROFS':
      return new FsError(403, 'read_only', `${virtualPath} is on a read-only file system`);
    case 'EFBIG':
      return tooLarge('file_too_large', `${virtualPath}: the file would be larger than the file system allows`);
    case 'ENOSPC':
    case 'EDQUOT':
      // The host, not the request: 507 as WebDAV defines it, passed on by the API.
      return new FsError(507, 'insufficient_storage', `${virtualPath}: no space left on the browser's file system`);
    default:
      return error;
  }
}
