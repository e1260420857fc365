// Cargo test runner for wasm32-wasip1: runs a test binary (a .wasm) in
// Node's WASI, so the core's plain #[test]s run on wasm32 in V8.
//   CARGO_TARGET_WASM32_WASIP1_RUNNER="node --no-warnings wasm/tests/wasi-run.mjs"
import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';

const [file, ...args] = process.argv.slice(2);
const wasi = new WASI({ version: 'preview1', args: [file, ...args], env: {}, returnOnExit: true });
const module = await WebAssembly.compile(await readFile(file));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
process.exitCode = wasi.start(instance);
