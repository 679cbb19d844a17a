import { z } from 'zod';

/**
 * Where profiles and replays live (docs/storage.md): files under the data dir (one
 * replica, or a ReadWriteMany volume) or an S3-compatible bucket that several API
 * replicas share. Spread into config.ts's schema. Credentials come from the AWS SDK's
 * default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, web identity in EKS), never
 * from a setting here, so they are never printed with the settings.
 */
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

export const storageFields = {
  BROWSERPLANE_STORE: z
    .enum(['file', 's3'])
    .default('file')
    .describe('Where profiles and replays are stored: file (BROWSERPLANE_PROFILE_DIR, BROWSERPLANE_REPLAY_DIR) or s3 (a bucket several API replicas share)'),
  BROWSERPLANE_S3_BUCKET: optionalString
    .pipe(z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'an S3 bucket name').optional())
    .describe('With BROWSERPLANE_STORE=s3: the bucket (required); credentials come from the AWS SDK default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, IRSA)'),
  BROWSERPLANE_S3_ENDPOINT: optionalString
    .pipe(z.url({ protocol: /^https?$/ }).optional())
    .describe('With BROWSERPLANE_STORE=s3: the endpoint URL of an S3-compatible server (MinIO, Ceph, R2); default: AWS S3 of the region'),
  BROWSERPLANE_S3_REGION: z.string().trim().min(1).default('us-east-1').describe('With BROWSERPLANE_STORE=s3: the bucket\'s region'),
  BROWSERPLANE_S3_PREFIX: z
    .string()
    .default('browserplane/')
    .pipe(z.string().max(200).regex(/^([A-Za-z0-9_-][A-Za-z0-9._-]*\/)*$/, 'empty or path segments (not starting with a dot) each ending in /'))
    .describe('With BROWSERPLANE_STORE=s3: the key prefix everything is stored under (profiles/… and replays/… follow it)'),
  BROWSERPLANE_S3_FORCE_PATH_STYLE: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe('With BROWSERPLANE_STORE=s3: address the bucket in the path (true for MinIO-style endpoints) rather than as a subdomain'),
};

export interface S3StoreSettings {
  bucket: string;
  endpoint: string | undefined;
  region: string;
  prefix: string;
  forcePathStyle: boolean;
}

interface StorageConfig {
  BROWSERPLANE_STORE: 'file' | 's3';
  BROWSERPLANE_S3_BUCKET?: string | undefined;
  BROWSERPLANE_S3_ENDPOINT?: string | undefined;
  BROWSERPLANE_S3_REGION: string;
  BROWSERPLANE_S3_PREFIX: string;
  BROWSERPLANE_S3_FORCE_PATH_STYLE: boolean;
}

/** The S3 settings when BROWSERPLANE_STORE=s3, else undefined; s3 without a bucket is refused. */
export function s3StoreSettingsOf(config: StorageConfig): S3StoreSettings | undefined {
  if (config.BROWSERPLANE_STORE !== 's3') return undefined;
  if (!config.BROWSERPLANE_S3_BUCKET) throw new Error('BROWSERPLANE_STORE=s3 needs BROWSERPLANE_S3_BUCKET');
  return {
    bucket: config.BROWSERPLANE_S3_BUCKET,
    endpoint: config.BROWSERPLANE_S3_ENDPOINT,
    region: config.BROWSERPLANE_S3_REGION,
    prefix: config.BROWSERPLANE_S3_PREFIX,
    forcePathStyle: config.BROWSERPLANE_S3_FORCE_PATH_STYLE,
  };
}
