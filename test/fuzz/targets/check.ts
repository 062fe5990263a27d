/** Assertions of fuzz targets: a failed one is a finding, like an unexpected exception. */
export class FuzzInvariantError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FuzzInvariantError';
  }
}

/**
 * Finding classes a long run may skip while their fix is pending (FUZZ_IGNORE=host-not-a-url,...), so the run
 * goes on to find the next thing instead of stopping at a known one. Never set in CI or in the regression tests.
 */
const IGNORED = new Set((process.env.FUZZ_IGNORE ?? '').split(',').filter((s) => s !== ''));

export function check(condition: boolean, message: string, findingClass?: string): asserts condition {
  if (condition || (findingClass !== undefined && IGNORED.has(findingClass))) return;
  throw new FuzzInvariantError(findingClass === undefined ? message : `${message} [${findingClass}]`);
}
