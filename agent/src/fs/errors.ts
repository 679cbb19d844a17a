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

/** Maps errno codes from fs calls to the one error body; anything else stays a 500. */
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
    default:
      return error;
  }
}
