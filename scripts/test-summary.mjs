// Adds up the vitest JSON reports of this run (and the fuzz's counts, when it ran) and
// prints one plain closing line. It must be the last line make test prints: CI reads
// the closing lines to tell a run that tested something from one that tested nothing.
import { existsSync, readdirSync, readFileSync } from 'node:fs';

const dir = '.test-results';
let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of readdirSync(dir).filter((f) => f.endsWith('.json'))) {
  const report = JSON.parse(readFileSync(`${dir}/${file}`, 'utf8'));
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  skipped += report.numPendingTests + (report.numTodoTests ?? 0);
}
const fuzz = `${dir}/fuzz.counts`;
if (existsSync(fuzz)) {
  const counts = JSON.parse(readFileSync(fuzz, 'utf8'));
  console.log(`fuzz: ${counts.generated} generated cases, ${counts.passed} of them passed`);
  if (counts.generated === 0 || counts.passed !== counts.generated) failed += 1;
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exitCode = failed > 0 || passed === 0 ? 1 : 0;
