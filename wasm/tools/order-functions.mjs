// Usage: node order-functions.mjs FILE.wasm
//
// Puts the functions of an optimised .wasm in the order, of a few tried,
// that gzip -9 squeezes best, in place (the file as it is when none beats
// it). The orders group functions by signature and by size class, or chain
// each function to the one most like it, so functions alike sit close
// together, inside gzip's 32 KB window: ~5 KB gzip of the full .wasm,
// ~1.3 KB of the client one. The code is not changed, only where each
// function is (and so the indices calls use). Prints the gzip -9 figure as
// given and in the best order.
//
// wasm-opt orders functions for the size of their indices, not for gzip,
// and has no pass for an order of one's own: this rebuilds the function
// list with binaryen's JS API, then writes the module as wasm-opt -Oz does
// (StackIR generated and optimised: without it the code grows ~0.8 KB).
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { deflateRawSync, gzipSync } from 'node:zlib';
import binaryen from 'binaryen';
import { readU32 as readLeb } from './leb128.mjs';

const [wasmPath] = process.argv.slice(2);
if (!wasmPath) {
  console.error('usage: node order-functions.mjs FILE.wasm');
  process.exit(2);
}
const bytes = readFileSync(wasmPath);

const readU32 = (pos) => readLeb(bytes, pos);

// The signature (function section) and body size (code section) of each
// function the module defines, in the module's order.
const types = [];
const sizes = [];
// The first 4 bytes of each body's code (past its locals), as a number.
const starts = [];
// Each body's bytes.
const bodies = [];
function codeStart(pos, end) {
  let groups;
  [groups, pos] = readU32(pos);
  for (let i = 0; i < groups; i++) pos = readU32(pos)[1] + 1;
  let key = 0;
  for (let i = 0; i < 4; i++) key = key * 256 + (pos + i < end ? bytes[pos + i] : 0);
  return key;
}
for (let pos = 8; pos < bytes.length; ) {
  const id = bytes[pos++];
  let size;
  [size, pos] = readU32(pos);
  const end = pos + size;
  if (id === 3 || id === 10) {
    let [count, at] = readU32(pos);
    for (let i = 0; i < count; i++) {
      let n;
      [n, at] = readU32(at);
      if (id === 3) {
        types.push(n);
      } else {
        sizes.push(n);
        starts.push(codeStart(at, at + n));
        bodies.push(bytes.subarray(at, at + n));
        at += n;
      }
    }
  }
  pos = end;
}
if (types.length !== sizes.length) {
  console.error(`${wasmPath}: ${types.length} functions but ${sizes.length} bodies`);
  process.exit(1);
}

const uses = new Map();
for (const t of types) uses.set(t, (uses.get(t) || 0) + 1);
const by = (key) => types.map((_, i) => i).sort((a, b) => key(a, b) || a - b);
// Orders to try (which is best differs between the three builds, and
// from one build to the next, by a few hundred bytes): by signature, or
// first by a size class (log2 of the body's size in steps of 1, 1/2 or
// 1/4; for halves, also with the class bounds shifted by a quarter step
// each way), then signature (and, for halves, the first bytes of the
// code), or by size alone; always smallest first within what is equal.
const sizeClass = (i, steps, shift) => Math.floor(steps * Math.log2(sizes[i] + 1) + shift);
const bySizeClass = (steps, shift = 0, start = false) =>
  by(
    (a, b) =>
      sizeClass(a, steps, shift) - sizeClass(b, steps, shift) ||
      types[a] - types[b] ||
      (start && starts[a] - starts[b]) ||
      sizes[a] - sizes[b],
  );

// A chain built greedily, from the largest function (or the smallest):
// after each function, of the 40 whose bytes look most like its own
// (min-hashes of their 4-byte strings), the one whose deflated size
// shrinks most when the last `window` bytes of the chain are its
// dictionary (gzip's reach is 32 KB): the function that gains most from
// being right there, not merely one that deflates well anywhere. Which
// window and start do best varies (±0.3 KB gzip between neighbours, and
// from one build to the next), so 18 are tried: ~1.5 min for the full
// .wasm. Deterministic: no randomness, ties go to the lower index.
const HASHES = 32;
const n = bodies.length;
const sigs = new Uint32Array(n * HASHES).fill(0xffffffff);
function signatures() {
  for (let i = 0; i < n; i++) {
    const b = bodies[i];
    const last = Math.max(b.length - 4, 0);
    for (let p = 0; p <= last; p++) {
      const word = (b[p] | ((b[p + 1] ?? 0) << 8) | ((b[p + 2] ?? 0) << 16) | ((b[p + 3] ?? 0) << 24)) >>> 0;
      for (let h = 0; h < HASHES; h++) {
        let x = Math.imul(word ^ Math.imul(h + 1, 0x9e3779b9), 0x85ebca6b);
        x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
        x = (x ^ (x >>> 16)) >>> 0;
        if (x < sigs[i * HASHES + h]) sigs[i * HASHES + h] = x;
      }
    }
  }
}
signatures();

// Each body deflated alone: what the chain saves on it is measured from there.
const alone = bodies.map((b) => deflateRawSync(b, { level: 9 }).length);
function chained(windowSize, fromSmallest = false) {
  const left = new Set(types.map((_, i) => i));
  let current = 0;
  for (let i = 1; i < n; i++) {
    if (fromSmallest ? sizes[i] < sizes[current] : sizes[i] > sizes[current]) current = i;
  }
  const order = [];
  let window = Buffer.alloc(0);
  const alike = new Int32Array(n);
  for (;;) {
    order.push(current);
    left.delete(current);
    window = Buffer.concat([window, bodies[current]]);
    if (window.length > windowSize) window = window.subarray(window.length - windowSize);
    if (left.size === 0) return order;
    const ranked = [];
    for (const j of left) {
      let same = 0;
      for (let h = 0; h < HASHES; h++) {
        if (sigs[current * HASHES + h] === sigs[j * HASHES + h]) same++;
      }
      alike[j] = same;
      ranked.push(j);
    }
    ranked.sort((a, b) => alike[b] - alike[a] || a - b);
    let best = -1;
    let bestCost = Infinity;
    for (const j of ranked.slice(0, 40)) {
      const cost = deflateRawSync(bodies[j], { level: 9, dictionary: window }).length - alone[j];
      if (cost < bestCost) {
        bestCost = cost;
        best = j;
      }
    }
    current = best;
  }
}
const orders = {
  'signatures used by fewest functions first': by(
    (a, b) => uses.get(types[a]) - uses.get(types[b]) || types[a] - types[b] || sizes[a] - sizes[b],
  ),
  signature: by((a, b) => types[a] - types[b] || sizes[a] - sizes[b]),
  'size class (log2), then signature': bySizeClass(1),
  'size class (log2 in halves), then signature': bySizeClass(2),
  'size class (log2 in halves, shifted 1/4), then signature': bySizeClass(2, 0.25),
  'size class (log2 in halves, shifted 1/2), then signature': bySizeClass(2, 0.5),
  'size class (log2 in halves, shifted 3/4), then signature': bySizeClass(2, 0.75),
  'size class (log2 in quarters), then signature': bySizeClass(4),
  // The same with the functions whose code starts alike together.
  'size class (log2 in halves), then signature and start': bySizeClass(2, 0, true),
  'size class (log2 in halves, shifted 1/4), then signature and start': bySizeClass(2, 0.25, true),
  'size class (log2 in halves, shifted 1/2), then signature and start': bySizeClass(2, 0.5, true),
  'size class (log2 in halves, shifted 3/4), then signature and start': bySizeClass(2, 0.75, true),
  size: by((a, b) => sizes[a] - sizes[b]),
};
for (const size of [27000, 28000, 29000, 30000, 30500, 31000, 31500, 32000, 32768]) {
  orders[`chained by likeness (${size}-byte window)`] = chained(size);
  orders[`chained by likeness from the smallest (${size}-byte window)`] = chained(size, true);
}

/** gzip -9 of `data` (GNU gzip when there is one: the figure the build prints). */
function gzipSize(data) {
  const gz = spawnSync('gzip', ['-9', '-c'], { input: data, maxBuffer: 1 << 30 });
  if (gz.status === 0) return gz.stdout.length;
  return gzipSync(data, { level: 9 }).length;
}

// As wasm-opt -Oz --low-memory-unused writes it.
binaryen.setOptimizeLevel(2);
binaryen.setShrinkLevel(2);
binaryen.setLowMemoryUnused(true);
binaryen.setGenerateStackIR(true);
binaryen.setOptimizeStackIR(true);
/** The module with its functions in `order`. */
function reordered(order) {
  const module = binaryen.readBinary(bytes);
  const defined = [];
  for (let i = 0; i < module.getNumFunctions(); i++) {
    const info = binaryen.getFunctionInfo(module.getFunctionByIndex(i));
    if (!info.module) defined.push(info);
  }
  if (defined.length !== types.length) {
    console.error(`${wasmPath}: binaryen read ${defined.length} functions, the file has ${types.length}`);
    process.exit(1);
  }
  // Removed and added again in the new order: added functions go last. The
  // bodies stay (they belong to the module); calls and exports name functions.
  for (const i of order) {
    const f = defined[i];
    module.removeFunction(f.name);
    module.addFunction(f.name, f.params, f.results, f.vars, f.body);
  }
  if (!module.validate()) {
    console.error(`${wasmPath}: the reordered module does not validate`);
    process.exit(1);
  }
  const out = module.emitBinary();
  module.dispose();
  return out;
}

// The smallest, the file as it is included.
let best = { name: 'as given', data: bytes, size: gzipSize(bytes) };
console.log(`${wasmPath}: as given ${best.size} bytes gzip -9`);
for (const [name, order] of Object.entries(orders)) {
  const data = reordered(order);
  const size = gzipSize(data);
  if (size < best.size) best = { name, data, size };
}
writeFileSync(wasmPath, best.data);
console.log(`${wasmPath}: functions in ${best.name} order, ${best.size} bytes gzip -9`);
