import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../api/src/config.js';
import { s3StoreSettingsOf } from '../../api/src/config-storage.js';

describe('storage settings', () => {
  it('default to the file store, and the S3 ones to their documented defaults', () => {
    const config = parseConfig({});
    expect(config.BROWSERPLANE_STORE).toBe('file');
    expect(s3StoreSettingsOf(config)).toBeUndefined();
    expect(config).toMatchObject({ BROWSERPLANE_S3_REGION: 'us-east-1', BROWSERPLANE_S3_PREFIX: 'browserplane/', BROWSERPLANE_S3_FORCE_PATH_STYLE: false });
  });

  it('give the S3 store its bucket, endpoint, region, prefix and addressing', () => {
    const config = parseConfig({
      BROWSERPLANE_STORE: 's3',
      BROWSERPLANE_S3_BUCKET: 'bp-data',
      BROWSERPLANE_S3_ENDPOINT: 'http://minio.minio.svc:9000',
      BROWSERPLANE_S3_REGION: 'eu-west-1',
      BROWSERPLANE_S3_PREFIX: 'prod/bp/',
      BROWSERPLANE_S3_FORCE_PATH_STYLE: 'true',
    });
    expect(s3StoreSettingsOf(config)).toEqual({
      bucket: 'bp-data',
      endpoint: 'http://minio.minio.svc:9000',
      region: 'eu-west-1',
      prefix: 'prod/bp/',
      forcePathStyle: true,
    });
    expect(s3StoreSettingsOf(parseConfig({ BROWSERPLANE_STORE: 's3', BROWSERPLANE_S3_BUCKET: 'b-1', BROWSERPLANE_S3_PREFIX: '' }))?.prefix).toBe('');
  });

  it('refuse s3 without a bucket, and malformed values', () => {
    expect(() => s3StoreSettingsOf(parseConfig({ BROWSERPLANE_STORE: 's3' }))).toThrow(/BROWSERPLANE_S3_BUCKET/);
    expect(() => parseConfig({ BROWSERPLANE_STORE: 'gcs' })).toThrow();
    expect(() => parseConfig({ BROWSERPLANE_S3_BUCKET: 'Not_A_Bucket' })).toThrow();
    expect(() => parseConfig({ BROWSERPLANE_S3_ENDPOINT: 'ftp://x' })).toThrow();
    expect(() => parseConfig({ BROWSERPLANE_S3_PREFIX: '../up/' })).toThrow();
    expect(() => parseConfig({ BROWSERPLANE_S3_PREFIX: 'no-slash' })).toThrow();
    expect(() => parseConfig({ BROWSERPLANE_S3_FORCE_PATH_STYLE: 'yes' })).toThrow();
  });
});
