/**
 * The spec's `identifier` (common.schema.json): the names of channels, action types, embodiments and
 * frames are 1 to 128 characters. A peer's longer "name" is no name: the edge keys maps and metric
 * labels by names, per frame, and a megabyte key costs a megabyte of hashing each time.
 */
export const MAX_IDENTIFIER_CHARS = 128;

/** Whether `v` is a string of an identifier's length (the pattern is the world's to check). */
export function isIdentifierSized(v: unknown): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= MAX_IDENTIFIER_CHARS;
}
