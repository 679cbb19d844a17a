import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../../support/service.js';

/**
 * Runs Python snippets with the Python SDK (`kernel` 0.131.0, from scripts/python-sdk.sh)
 * against a service the e2e tier started, as a new user's script would: the key and base
 * URL come from KERNEL_API_KEY and KERNEL_BASE_URL, which the SDK reads itself.
 *
 * A snippet ends with `emit(value)`; value is JSON (dump() turns SDK models into dicts).
 * `client(**options)` is `Kernel(**options)` without retries, so a refusal is seen once.
 * An exception the snippet does not catch rejects with a PythonError carrying the
 * SDK's error class, status and body.
 */

const PRELUDE = `
import json, sys, datetime
from kernel import Kernel
import kernel

def client(**options):
    return Kernel(max_retries=0, **options)

def dump(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value

def emit(value):
    print("__RESULT__" + json.dumps(dump(value)))

def __run():
`;

const EPILOGUE = `
try:
    __run()
except Exception as error:
    print("__ERROR__" + json.dumps({
        "type": type(error).__name__,
        "status": getattr(error, "status_code", None),
        "body": getattr(error, "body", None),
        "message": str(error),
    }, default=str))
`;

export class PythonError extends Error {
  constructor(
    readonly type: string,
    readonly status: number | null,
    readonly body: unknown,
    message: string,
  ) {
    super(`${type}${status === null ? '' : ` ${status}`}: ${message}`);
  }
}

let pythonPath: Promise<string> | undefined;

/** The venv's python, made on first use when `make test-e2e` has not made it already. */
export function sdkPython(): Promise<string> {
  pythonPath ??= promisify(execFile)(path.join(REPO_ROOT, 'scripts/python-sdk.sh'), [], { timeout: 600_000 }).then(({ stdout }) =>
    stdout.trim().split('\n').at(-1)!,
  );
  return pythonPath;
}

export interface PythonTarget {
  url: string;
  apiKey: string;
  /** More environment, e.g. KERNEL_PROJECT. */
  env?: Record<string, string>;
}

/** The lines without the indent they all share, so snippets can sit indented in a test. */
function dedent(code: string): string[] {
  const lines = code.replace(/^\n+/, '').trimEnd().split('\n');
  const indent = Math.min(...lines.filter((line) => line.trim() !== '').map((line) => /^ */.exec(line)![0].length));
  return lines.map((line) => line.slice(indent));
}

/**
 * Runs `code` (Python statements, as the body of a function; parts of an array are
 * dedented each on its own, so shared helpers can be put in front) and returns what it emitted.
 */
export async function runPython<T = unknown>(target: PythonTarget, code: string | string[], timeoutMs = 120_000): Promise<T> {
  const body = (Array.isArray(code) ? code : [code])
    .flatMap(dedent)
    .map((line) => `    ${line}`)
    .join('\n');
  const script = `${PRELUDE}${body}\n    pass\n${EPILOGUE}`;
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    KERNEL_API_KEY: target.apiKey,
    KERNEL_BASE_URL: target.url,
    ...target.env,
  };
  const { stdout, stderr } = await promisify(execFile)(await sdkPython(), ['-c', script], { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }).catch(
    (error: { stdout?: string; stderr?: string; message: string }) => {
      throw new Error(`python failed: ${error.message}\n${error.stderr ?? ''}`);
    },
  );
  const lines = stdout.split('\n');
  const failed = lines.find((line) => line.startsWith('__ERROR__'));
  if (failed) {
    const e = JSON.parse(failed.slice('__ERROR__'.length)) as { type: string; status: number | null; body: unknown; message: string };
    throw new PythonError(e.type, e.status, e.body, e.message);
  }
  const result = lines.find((line) => line.startsWith('__RESULT__'));
  if (!result) throw new Error(`the snippet emitted nothing\nstdout: ${stdout}\nstderr: ${stderr}`);
  return JSON.parse(result.slice('__RESULT__'.length)) as T;
}
