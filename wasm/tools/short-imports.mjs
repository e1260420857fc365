// Usage: node short-imports.mjs FILE.wasm GLUE.js...
//
// Gives the imports of a wasm-bindgen .wasm short names, in place, and the
// glues (which provide them as the keys of one object) the same names.
// wasm-bindgen names each import after its JS function plus a 16-digit hash
// (`__wbg_fetch_08a6b76890f338a6`): about a hundred such names, whose hashes
// gzip cannot squeeze, were ~1.5 KB of a gzipped .wasm. The module name
// (`./toolnexus_wasm_bg.js`) and everything else stay as they are.
//
// Fails (exit 1) when a glue does not name every import it renames: a glue
// that did not provide one would fail at instantiation.
import { readFileSync, writeFileSync } from 'node:fs';
import { readU32 as readLeb } from './leb128.mjs';

const [wasmPath, ...gluePaths] = process.argv.slice(2);
if (!wasmPath || gluePaths.length === 0) {
  console.error('usage: node short-imports.mjs FILE.wasm GLUE.js...');
  process.exit(2);
}
const bytes = readFileSync(wasmPath);
const MODULE = './toolnexus_wasm_bg.js';

const readU32 = (pos) => readLeb(bytes, pos);
function u32(n) {
  const out = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}
function readName(pos) {
  const [len, at] = readU32(pos);
  return [bytes.subarray(at, at + len).toString('utf8'), at + len];
}
function name(s) {
  const b = Buffer.from(s, 'utf8');
  return [...u32(b.length), ...b];
}
/** The end of an import's descriptor (kind byte included) starting at `pos`. */
function skipDesc(pos) {
  const kind = bytes[pos++];
  const limits = (p) => {
    const flags = bytes[p++];
    [, p] = readU32(p);
    if (flags & 1) [, p] = readU32(p);
    return p;
  };
  switch (kind) {
    case 0: return readU32(pos)[1]; // func: type index
    case 1: return limits(pos + 1); // table: reftype, limits
    case 2: return limits(pos); // memory: limits
    case 3: return pos + 2; // global: valtype, mutability
    case 4: return readU32(pos + 1)[1]; // tag: attribute, type index
    default: throw new Error(`unknown import kind ${kind} at byte ${pos - 1}`);
  }
}
/** 0 -> a, 25 -> z, 26 -> A, 51 -> Z, 52 -> aa, ... (valid JS identifiers). */
function shortName(i) {
  const ABC = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
  let s = '';
  for (let n = i; ; n = Math.floor(n / ABC.length) - 1) {
    s = ABC[n % ABC.length] + s;
    if (n < ABC.length) return s;
  }
}

if (bytes.readUInt32LE(0) !== 0x6d736100) throw new Error(`${wasmPath} is not a .wasm`);
const renamed = new Map();
const out = [bytes.subarray(0, 8)];
let pos = 8;
while (pos < bytes.length) {
  const id = bytes[pos];
  const [size, body] = readU32(pos + 1);
  const end = body + size;
  if (id !== 2) {
    out.push(bytes.subarray(pos, end));
    pos = end;
    continue;
  }
  let [count, p] = readU32(body);
  const section = [...u32(count)];
  for (let i = 0; i < count; i++) {
    let module;
    let field;
    [module, p] = readName(p);
    [field, p] = readName(p);
    const descEnd = skipDesc(p);
    if (module === MODULE) {
      if (!renamed.has(field)) renamed.set(field, shortName(renamed.size));
      field = renamed.get(field);
    }
    section.push(...name(module), ...name(field), ...bytes.subarray(p, descEnd));
    p = descEnd;
  }
  if (p !== end) throw new Error('the import section did not parse to its end');
  out.push(Buffer.from([2, ...u32(section.length), ...section]));
  pos = end;
}
writeFileSync(wasmPath, Buffer.concat(out));

for (const glue of gluePaths) {
  const text = readFileSync(glue, 'utf8');
  const seen = new Set();
  const next = text.replace(/[A-Za-z_$][\w$]*/g, (id) => {
    const to = renamed.get(id);
    if (to === undefined) return id;
    seen.add(id);
    return to;
  });
  const missing = [...renamed.keys()].filter((k) => !seen.has(k));
  if (missing.length) {
    console.error(`${glue} does not provide the imports ${missing.join(', ')}`);
    process.exit(1);
  }
  writeFileSync(glue, next);
}
console.log(`short-imports: ${renamed.size} imports renamed in ${wasmPath}`);
