/* tslint:disable */
/* eslint-disable */
export const memory: WebAssembly.Memory;
export const __wbg_compiledschema_free: (a: number, b: number) => void;
export const __wbg_schemacompileerror_free: (a: number, b: number) => void;
export const compileSchema: (a: number, b: number) => [number, number, number];
export const compiledschema_catalog: (a: number) => [number, number];
export const compiledschema_hash: (a: number) => [number, number];
export const compiledschema_validate: (a: number, b: number, c: number, d: number, e: number) => [number, number, number, number];
export const compiledschema_validateObject: (a: number, b: number, c: number, d: number, e: number) => [number, number, number];
export const og_abi_version: () => number;
export const og_alloc: (a: number) => number;
export const og_free: (a: number, b: number) => void;
export const og_prepare: (a: number, b: number, c: number, d: number, e: number, f: number) => bigint;
export const og_validate: (a: number, b: number, c: number, d: number, e: number, f: number) => bigint;
export const rules: () => any;
export const schemacompileerror_column: (a: number) => number;
export const schemacompileerror_errorsJson: (a: number) => [number, number];
export const schemacompileerror_line: (a: number) => number;
export const schemacompileerror_message: (a: number) => [number, number];
export const validate: (a: number, b: number, c: number, d: number, e: number, f: number) => [number, number, number, number];
export const __wbindgen_exn_store: (a: number) => void;
export const __externref_table_alloc: () => number;
export const __wbindgen_externrefs: WebAssembly.Table;
export const __wbindgen_malloc: (a: number, b: number) => number;
export const __wbindgen_realloc: (a: number, b: number, c: number, d: number) => number;
export const __wbindgen_free: (a: number, b: number, c: number) => void;
export const __externref_table_dealloc: (a: number) => void;
export const __wbindgen_start: () => void;
