#!/usr/bin/env node
// The architecture rules ESLint cannot state (docs/ARCHITECTURE.md, "Packages"): no import
// cycle in product code, type imports included (madge), and no product file over 400
// lines. The import arrows between packages are ESLint's (eslint.config.js).
import { readFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import madge from 'madge';

const PRODUCT = ['api/src', 'operator/src', 'agent/src', 'contract', 'lib'];
const MAX_LINES = 400;
const problems = [];

const graph = await madge(PRODUCT, {
  fileExtensions: ['ts'],
  tsConfig: 'tsconfig.json',
  // Type-only imports count: a cycle through types still ties the modules together.
  detectiveOptions: { ts: { skipTypeImports: false }, tsx: { skipTypeImports: false } },
});
for (const cycle of graph.circular()) problems.push(`import cycle: ${cycle.join(' > ')} > ${cycle[0]}`);

const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '--', ...PRODUCT], { encoding: 'utf8' })
  .split('\n')
  .filter((file) => file.endsWith('.ts'));
for (const file of files) {
  let text;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    continue; // deleted in the work tree
  }
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  if (lines > MAX_LINES) problems.push(`${file}: ${lines} lines (at most ${MAX_LINES}: split it by concern)`);
}

if (problems.length > 0) {
  console.error(`architecture check: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
console.log(`architecture check: ${Object.keys(graph.obj()).length} modules, no import cycle, no file over ${MAX_LINES} lines`);
