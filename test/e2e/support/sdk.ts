import { randomBytes } from 'node:crypto';
import type { APIError } from '@onkernel/sdk';
import { expect } from 'vitest';

/** A name no other test uses, so tests sharing one service never see each other's data. */
export const unique = (prefix: string) => `${prefix}-${randomBytes(5).toString('hex')}`;

export const DAY_MS = 86_400_000;

/** Awaits a call that must fail with `type` (an SDK error class) and returns the error. */
export async function rejection<E extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  let result: unknown;
  try {
    result = await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(type);
    return error as E;
  }
  throw new Error(`expected ${type.name}, but the call succeeded with ${JSON.stringify(result)}`);
}

/** The `field`s of an error body's details, sorted. */
export function detailFields(error: APIError): string[] {
  const body: unknown = error.error;
  const details: unknown = typeof body === 'object' && body !== null && 'details' in body ? body.details : [];
  return (Array.isArray(details) ? (details as Array<{ field?: string }>) : []).map((d) => d.field ?? '').sort();
}

export interface RecordedCall {
  method: string;
  url: URL;
  status: number;
  headers: Headers;
}

/** A fetch for `new Kernel({ fetch })` that records what went over the wire. */
export function recordingFetch() {
  const calls: RecordedCall[] = [];
  const recording = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await fetch(input, init);
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    calls.push({ method: init?.method ?? 'GET', url, status: response.status, headers: response.headers });
    return response;
  };
  return { fetch: recording, calls };
}

export const msBetween = (from: string | null, to: string | null) => Date.parse(to ?? 'x') - Date.parse(from ?? 'x');
