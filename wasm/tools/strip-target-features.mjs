// Usage: node strip-target-features.mjs FILE.wasm
//
// Drops the `target_features` custom section (which wasm features the code
// was compiled for: metadata for linkers and wasm-opt, ignored by every
// runtime) from a finished .wasm, in place: ~100 B gzip of each .wasm.
// Run last: wasm-opt and binaryen's JS API (order-functions.mjs) read it to
// know the module's features. Every other section is kept byte for byte.
import { readFileSync, writeFileSync } from 'node:fs';
import { readU32 } from './leb128.mjs';

const [wasmPath] = process.argv.slice(2);
if (!wasmPath) {
  console.error('usage: node strip-target-features.mjs FILE.wasm');
  process.exit(2);
}
const bytes = readFileSync(wasmPath);
const kept = [bytes.subarray(0, 8)];
for (let pos = 8; pos < bytes.length; ) {
  const start = pos;
  const id = bytes[pos++];
  let size;
  [size, pos] = readU32(bytes, pos);
  const end = pos + size;
  let drop = false;
  if (id === 0) {
    const [len, at] = readU32(bytes, pos);
    drop = bytes.subarray(at, at + len).toString() === 'target_features';
  }
  if (!drop) kept.push(bytes.subarray(start, end));
  pos = end;
}
writeFileSync(wasmPath, Buffer.concat(kept));
