/* tslint:disable */
/* eslint-disable */

/**
 * A compiled schema, reusable for many batches. Each validates in the
 * memory the last one left (its `Scratch`: the module's memory never
 * shrinks, so keeping it costs nothing and spares regrowing the maps).
 */
export class CompiledSchema {
    private constructor();
    free(): void;
    [Symbol.dispose](): void;
    /**
     * Like `validate`, but returns the report as a JS object (parsed inside
     * the module; see docs/performance.md for which crossing is faster).
     */
    validateObject(bytes: Uint8Array | number[], options?: string | null): any;
    /**
     * Validates `bytes` and returns the report JSON (SPEC §3).
     * `options` is options JSON; omitted = defaults.
     */
    validate(bytes: Uint8Array | number[], options?: string | null): string;
    /**
     * The canonical catalog JSON.
     */
    readonly catalog: string;
    /**
     * `sha256:…` of the canonical catalog (SPEC §1.5).
     */
    readonly hash: string;
}

/**
 * A schema that failed to compile: every error with its line and column.
 */
export class SchemaCompileError {
    private constructor();
    free(): void;
    [Symbol.dispose](): void;
    /**
     * Column of the first error (1-based, in characters).
     */
    readonly column: number;
    /**
     * All errors as JSON: `{"errors":[{"line","column","message"}…]}`.
     */
    readonly errorsJson: string;
    /**
     * Line of the first error (1-based).
     */
    readonly line: number;
    /**
     * All errors, one `line:column: message` per line.
     */
    readonly message: string;
}

/**
 * Compiles `.pg` source; throws a `SchemaCompileError` with line/column.
 */
export function compileSchema(source: string): CompiledSchema;

/**
 * `{validator_version, abi_version}`: what a client reports to prove it
 * validates with the host's rules (with the artifact's SHA-256).
 */
export function rules(): any;

/**
 * One-shot: compile `schema` and validate `bytes`; returns the report JSON.
 */
export function validate(schema: string, bytes: Uint8Array | number[], options?: string | null): string;
