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

export type InitInput = RequestInfo | URL | Response | BufferSource | WebAssembly.Module;

export interface InitOutput {
    readonly memory: WebAssembly.Memory;
    readonly __wbg_compiledschema_free: (a: number, b: number) => void;
    readonly __wbg_schemacompileerror_free: (a: number, b: number) => void;
    readonly compileSchema: (a: number, b: number) => [number, number, number];
    readonly compiledschema_catalog: (a: number) => [number, number];
    readonly compiledschema_hash: (a: number) => [number, number];
    readonly compiledschema_validate: (a: number, b: number, c: number, d: number, e: number) => [number, number, number, number];
    readonly compiledschema_validateObject: (a: number, b: number, c: number, d: number, e: number) => [number, number, number];
    readonly og_abi_version: () => number;
    readonly og_alloc: (a: number) => number;
    readonly og_compile: (a: number, b: number) => bigint;
    readonly og_free: (a: number, b: number) => void;
    readonly og_prepare: (a: number, b: number, c: number, d: number, e: number, f: number) => bigint;
    readonly og_prepare_compiled: (a: number, b: number, c: number, d: number, e: number, f: number) => bigint;
    readonly og_validate: (a: number, b: number, c: number, d: number, e: number, f: number) => bigint;
    readonly og_validate_compiled: (a: number, b: number, c: number, d: number, e: number, f: number) => bigint;
    readonly rules: () => any;
    readonly schemacompileerror_column: (a: number) => number;
    readonly schemacompileerror_errorsJson: (a: number) => [number, number];
    readonly schemacompileerror_line: (a: number) => number;
    readonly schemacompileerror_message: (a: number) => [number, number];
    readonly validate: (a: number, b: number, c: number, d: number, e: number, f: number) => [number, number, number, number];
    readonly __wbindgen_exn_store: (a: number) => void;
    readonly __externref_table_alloc: () => number;
    readonly __wbindgen_externrefs: WebAssembly.Table;
    readonly __wbindgen_malloc: (a: number, b: number) => number;
    readonly __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
    readonly __wbindgen_free: (a: number, b: number, c: number) => void;
    readonly __externref_table_dealloc: (a: number) => void;
    readonly __wbindgen_start: () => void;
}

export type SyncInitInput = BufferSource | WebAssembly.Module;

/**
 * Instantiates the given `module`, which can either be bytes or
 * a precompiled `WebAssembly.Module`.
 *
 * @param {{ module: SyncInitInput }} module - Passing `SyncInitInput` directly is deprecated.
 *
 * @returns {InitOutput}
 */
export function initSync(module: { module: SyncInitInput } | SyncInitInput): InitOutput;

/**
 * If `module_or_path` is {RequestInfo} or {URL}, makes a request and
 * for everything else, calls `WebAssembly.instantiate` directly.
 *
 * @param {{ module_or_path: InitInput | Promise<InitInput> }} module_or_path - Passing `InitInput` directly is deprecated.
 *
 * @returns {Promise<InitOutput>}
 */
export default function __wbg_init (module_or_path?: { module_or_path: InitInput | Promise<InitInput> } | InitInput | Promise<InitInput>): Promise<InitOutput>;
