/**
 * Small readers of the JSON Schemas upstream tools declare, shared by the stub generator and the literal
 * matcher: what a schema node is, local `$ref`s, and whether an object schema is closed. Schemas are
 * untrusted: nothing here recurses or trusts a shape.
 * @module
 */

/** A schema node: any JSON object. */
export type Schema = Record<string, unknown>;

/** Whether a value is a schema node (a JSON object, not an array). */
export function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The `properties` of an object schema, or none. */
export function propertiesOf(schema: unknown): Schema {
  if (!isSchema(schema) || !isSchema(schema.properties)) return {};
  return schema.properties;
}

/**
 * An object schema that names its properties and does not allow others, explicitly or by saying nothing:
 * codemode treats a schema as closed unless it explicitly allows more keys (the pre-run check and the
 * stubs agree on this).
 */
export function closed(schema: Schema): boolean {
  const extra = schema.additionalProperties;
  return (extra === undefined || extra === false) && schema.patternProperties === undefined &&
    schema.unevaluatedProperties === undefined && isSchema(schema.properties);
}

/** Resolves a local reference (`#/$defs/Name`, `#/definitions/Name`) against `root`; undefined if it can't. */
export function resolveLocalRef(root: unknown, ref: string, maxDepth = 16): unknown {
  if (!ref.startsWith("#")) return undefined;
  const path = ref.slice(1).split("/").slice(1);
  if (path.length > maxDepth) return undefined;
  let node = root;
  for (const raw of path) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    } catch {
      return undefined;
    }
    if (!isSchema(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}
