/**
 * Options objects with their undefined fields dropped, so that spreading them over defaults keeps the
 * defaults (`{ ...defaults, ...withoutUndefined(options) }`): a caller passing `{ limit: undefined }`
 * means "the default", not "no limit".
 * @module
 */

/** `value` without the fields whose value is undefined. */
export function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
