import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from './service.js';

/**
 * A real S3-compatible server for the S3 store tests: moto's server (`moto[server]` from
 * PyPI, in a venv scripts/moto-server.sh makes once outside the checkout), on a free
 * loopback port, with one fresh bucket. Its credentials are moto's dummy ones.
 */
export interface Moto {
  endpoint: string;
  bucket: string;
  client: S3Client;
  /** The environment a service needs to use this bucket (BROWSERPLANE_STORE=s3 …). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

const CREDENTIALS = { accessKeyId: 'moto-test', secretAccessKey: 'moto-test-secret' };

export async function startMoto(bucket = 'browserplane-test'): Promise<Moto> {
  const { stdout } = await promisify(execFile)(path.join(REPO_ROOT, 'scripts/moto-server.sh'), [], { timeout: 600_000 });
  const server = stdout.trim().split('\n').at(-1)!;
  const port = await freePort();
  const child = spawn(server, ['-H', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await untilServing(endpoint, child, () => stderr);
    const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: CREDENTIALS });
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
    return {
      endpoint,
      bucket,
      client,
      env: {
        BROWSERPLANE_STORE: 's3',
        BROWSERPLANE_S3_BUCKET: bucket,
        BROWSERPLANE_S3_ENDPOINT: endpoint,
        BROWSERPLANE_S3_FORCE_PATH_STYLE: 'true',
        AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
      },
      async stop() {
        client.destroy();
        await stop(child);
      },
    };
  } catch (error) {
    await stop(child);
    throw error;
  }
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  if (!address || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

async function untilServing(endpoint: string, child: ChildProcess, stderr: () => string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) throw new Error(`moto_server exited ${child.exitCode}: ${stderr()}`);
    try {
      await fetch(`${endpoint}/moto-api/`);
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`moto_server did not answer at ${endpoint}: ${stderr()}`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
