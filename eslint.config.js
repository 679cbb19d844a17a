// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Forbids imports matching `patterns` (gitignore-style globs, or `{regex}`) in `files`. */
function boundary(files, patterns, message) {
  const globs = patterns.filter((p) => typeof p === 'string');
  const regexes = patterns.filter((p) => typeof p !== 'string').map(({ regex }) => ({ regex, message }));
  return [{ files, rules: { 'no-restricted-imports': ['error', { patterns: [{ group: globs, message }, ...regexes] }] } }];
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.data/**', '.cache/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      'no-console': 'error',
      eqeqeq: ['error', 'always'],
    },
  },
  // Package boundaries (docs/ARCHITECTURE.md): contract/ and lib/ are what the packages
  // share and import none of them; the agent runs in the browser's sandbox or pod and
  // knows only the contract; the API never reaches into the operator; the operator uses
  // the API through its facades (api/src/index.ts and modules/<m>/index.ts) only.
  ...boundary(['contract/**'], ['**/api/**', '**/operator/**', '**/agent/**'], 'contract/ is shared by every package and imports none of them'),
  ...boundary(['lib/**'], ['**/api/**', '**/operator/**', '**/agent/**', '**/contract/**'], 'lib/ holds host utilities and imports no package of ours'),
  ...boundary(['agent/**'], ['**/api/**', '**/operator/**'], 'the agent imports only contract/ and lib/'),
  ...boundary(['api/**'], ['**/operator/**', '**/agent/**'], 'the API imports contract/ and lib/, never operator/ or agent/'),
  ...boundary(
    ['operator/**'],
    ['**/agent/**', { regex: '(^|/)api/src/(?!index\\.js$|modules/[^/]+/index\\.js$)' }],
    'the operator reaches the API only through api/src/index.ts and modules/<m>/index.ts',
  ),
  {
    // The agent runs with --jitless (api/src/runtime/agent-process.ts AGENT_NODE_FLAGS, the
    // image's CMD): no WebAssembly, so undici's fetch() throws there. The Playwright runner
    // is a child process of its own, started without those flags.
    files: ['agent/src/**/*.ts'],
    ignores: ['agent/src/playwright/runner.ts'],
    rules: {
      'no-restricted-globals': ['error', { name: 'fetch', message: 'the agent runs with --jitless, where fetch() throws: use node:http' }],
    },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: {
      'no-console': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
  { files: ['eslint.config.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  {
    files: ['scripts/**/*.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly' } },
    rules: { 'no-console': 'off' },
  },
);
