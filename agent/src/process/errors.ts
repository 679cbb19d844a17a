/** A refusal the caller can act on: `{code, message}` with its status, passed on by the service as is. */
export class ProcessError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const processNotFound = (id: string) => new ProcessError(404, 'process_not_found', `no process ${id.slice(0, 64)} in this browser`);
export const processExited = (id: string) => new ProcessError(409, 'process_exited', `process ${id} has exited`);
