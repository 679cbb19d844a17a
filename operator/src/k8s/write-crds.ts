/**
 * `make crds`: writes crds/<plural>.yaml from operator/src/k8s/crds.ts. The unit test
 * test/unit/crds.test.ts fails when the committed files differ from what this writes.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { packageRoot } from '../../../api/src/index.js';
import { crdFiles } from './crd-files.js';

const dir = path.join(packageRoot(), 'crds');
await mkdir(dir, { recursive: true });
for (const [name, text] of crdFiles()) {
  await writeFile(path.join(dir, name), text);
  process.stdout.write(`wrote crds/${name}\n`);
}
