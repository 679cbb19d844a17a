import { SubjectEndedError, WireError, type WireClient } from './wire-client.js';

/**
 * How a Job ends, which becomes the pod's exit code (job-main.ts): 'reported' and
 * 'ended' exit 0 (the API has the result, or wants none: the subject already ended);
 * 'unreported' exits non-zero, so the Job fails and the API's watch of the Job tells it.
 */
export type JobOutcome = 'reported' | 'ended' | 'unreported';

export async function reportResult(client: WireClient, path: string, result: object): Promise<JobOutcome> {
  try {
    await client.postJson(path, result);
    return 'reported';
  } catch (error) {
    if (error instanceof SubjectEndedError) return 'ended';
    // The result revokes the token: a 401 to a retry means an earlier attempt was taken.
    if (error instanceof WireError && error.status === 401 && error.retried) return 'reported';
    process.stderr.write(`browserplane pod: the result could not be reported: ${error instanceof Error ? error.message : String(error)}\n`);
    return 'unreported';
  }
}
