/**
 * The SDK's `auth()` reports some recoveries with `console.warn` (a refresh token the server refused, a
 * refresh that failed). Those lines would land unformatted on stderr, which carries JSON logs; while an
 * OAuth call runs they go to the caller instead, which scrubs and logs them.
 * @module
 */

let depth = 0;
let original: typeof console.warn | undefined;
const listeners: ((text: string) => void)[] = [];

/** Runs `fn` with the SDK's warnings handed to `onNote` instead of printed. */
export async function quietSdk<T>(onNote: (text: string) => void, fn: () => Promise<T>): Promise<T> {
  if (depth++ === 0) {
    original = console.warn;
    console.warn = (...args: unknown[]) => {
      const text = args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ");
      for (const listener of listeners) listener(text);
    };
  }
  listeners.push(onNote);
  try {
    return await fn();
  } finally {
    listeners.splice(listeners.indexOf(onNote), 1);
    if (--depth === 0) {
      console.warn = original!;
      original = undefined;
    }
  }
}
