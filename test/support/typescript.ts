/**
 * The compiler options a consumer of the package compiles with (strict, Node's ESM resolution through
 * the package's `exports`), for the tests that type-check code against the package as installed: the
 * package test's entries and the documentation's TypeScript examples.
 */
export const CONSUMER_COMPILER_OPTIONS = {
  strict: true,
  module: 'NodeNext',
  moduleResolution: 'NodeNext',
  target: 'ES2022',
  noEmit: true,
  types: ['node'],
} as const;
