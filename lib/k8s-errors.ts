import { ApiException } from '@kubernetes/client-node';

/** The HTTP status code of a failed Kubernetes API call (404, 409, …), or undefined for any other error. */
export function apiErrorCode(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}
