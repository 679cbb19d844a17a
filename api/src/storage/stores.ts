import path from 'node:path';
import { s3StoreSettingsOf } from '../config-storage.js';
import type { Config } from '../config.js';
import type { ProfileStore } from '../ports/profile-store.js';
import type { ReplayStore } from '../ports/replay-store.js';
import { createFileProfileStore } from './file-profile-store.js';
import { createFileReplayStore } from './file-replay-store.js';
import { s3BucketOf, s3ClientOf } from './s3-bucket.js';
import { createS3ProfileStore } from './s3-profile-store.js';
import { createS3ReplayStore } from './s3-replay-store.js';

/**
 * The profile and replay stores BROWSERPLANE_STORE names (docs/storage.md): files under
 * the data dir, or one S3-compatible bucket (one client for both). Made on demand, so a
 * caller that brings its own store makes none of ours.
 */
export function storesOf(config: Config): { profiles: () => ProfileStore; replays: () => ReplayStore } {
  const s3 = s3StoreSettingsOf(config);
  if (s3) {
    let bucket: ReturnType<typeof s3BucketOf> | undefined;
    const shared = () => (bucket ??= s3BucketOf(s3ClientOf(s3), s3));
    return { profiles: () => createS3ProfileStore(shared()), replays: () => createS3ReplayStore(shared()) };
  }
  return {
    profiles: () => createFileProfileStore(config.BROWSERPLANE_PROFILE_DIR ?? path.join(config.dataDir, 'profiles')),
    replays: () => createFileReplayStore(config.BROWSERPLANE_REPLAY_DIR ?? path.join(config.dataDir, 'replays')),
  };
}
