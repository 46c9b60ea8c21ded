#!/usr/bin/env node
// ONNX Runtime as the reference and the peer.
//
//   node ort_run.js MODEL.onnx [--input NAME=FILE.npy]... [--output-dir DIR]
//                   [--threads N] [--repeat N] [--opt all|basic|disabled] [--json]
//                   [--profile DIR]
//   node ort_run.js --manifest DIR/manifest.json --output-dir OUT
//
// The second form runs every case of a manifest (tests/models/make_op_models.py)
// once on one thread, writing OUT/CASE/OUTPUT.npy, or OUT/CASE/error.txt
// when ONNX Runtime refuses the case.
//
// Inputs come from .npy files (random in [-1, 1) when not given, seeded);
// each output is written as DIR/NAME.npy with the file name rule of
// `tensortune run` (outputFiles below).
// --json prints {"latency_s": median, "latencies_s": [...], "outputs": [...]}
// with the same meaning as `tensortune run --json`: one warm-up run, then
// --repeat timed runs.
// --profile DIR has ONNX Runtime write its trace of every run into DIR and
// prints each node's median kernel time, in the order the nodes run (with
// --json, as "profile": [{"node", "op", "median_s"}]): the peer's side of
// `tensortune run --profile`.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const DTYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array],
  // float16 travels as its bits: onnxruntime-node takes and gives a Uint16Array.
  '<f2': ['float16', Uint16Array],
  '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array], '|b1': ['bool', Uint8Array],
  '<i2': ['int16', Int16Array], '<u2': ['uint16', Uint16Array], '<u4': ['uint32', Uint32Array],
  '<u8': ['uint64', BigUint64Array],
};
const DESCR = Object.fromEntries(Object.entries(DTYPES).map(([d, [t]]) => [t, d]));

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt32BE(0) !== 0x934e554d) throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const offset = major === 1 ? 10 : 12;
  const header = buf.subarray(offset, offset + headerLen).toString('latin1');
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',')
      .map((s) => s.trim()).filter((s) => s.length).map(Number);
  if (!DTYPES[descr]) throw new Error(`${file}: dtype ${descr} not supported`);
  const [type, Array_] = DTYPES[descr];
  const data = buf.subarray(offset + headerLen);
  const copy = new Uint8Array(data.length);
  copy.set(data);
  return new ort.Tensor(type, new Array_(copy.buffer), shape);
}

function npyBytes(tensor) {
  const descr = DESCR[tensor.type];
  if (!descr) throw new Error(`output type ${tensor.type} not supported`);
  const dims = tensor.dims;
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const data = tensor.data;
  return Buffer.concat([head, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

function randomTensor(meta, seed) {
  // xorshift: reproducible without numpy.
  let s = BigInt(seed) * 2654435761n + 1n;
  const next = () => {
    s ^= s << 13n; s &= (1n << 64n) - 1n; s ^= s >> 7n; s ^= s << 17n; s &= (1n << 64n) - 1n;
    return Number(s >> 11n) / 2 ** 53;
  };
  const shape = meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1));
  const n = shape.reduce((a, b) => a * b, 1);
  if (meta.type !== 'float32') throw new Error(`input ${meta.name}: give a file for type ${meta.type}`);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = next() * 2 - 1;
  return new ort.Tensor('float32', data, shape);
}

// The file name of each output, as `tensortune run --output-dir` names it:
// NAME with characters outside [A-Za-z0-9._-] replaced by _, then _2, _3, ...
// added when two names collide.
function outputFiles(names) {
  const taken = new Set();
  return names.map((name) => {
    let stem = name.replace(/[^A-Za-z0-9._-]/g, '_');
    if (stem === '' || stem === '.' || stem === '..') stem = '_' + stem;
    let file = stem + '.npy';
    for (let k = 2; taken.has(file); ++k) file = `${stem}_${k}.npy`;
    taken.add(file);
    return file;
  });
}

function writeOutput(dir, fileName, tensor) {
  fs.mkdirSync(dir, {recursive: true});
  const file = path.join(dir, fileName);
  fs.writeFileSync(file + '.tmp', npyBytes(tensor));
  fs.renameSync(file + '.tmp', file);
}

async function runManifest(manifestPath, outDir) {
  const base = path.dirname(manifestPath);
  const cases = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  for (const c of cases) {
    const dir = path.join(outDir, c.name);
    try {
      const session = await ort.InferenceSession.create(path.join(base, c.model), {
        intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all',
      });
      const feeds = {};
      for (const i of c.inputs) feeds[i.name] = readNpy(path.join(base, i.file));
      const results = await session.run(feeds);
      const files = outputFiles(session.outputNames);
      session.outputNames.forEach((name, i) => writeOutput(dir, files[i], results[name]));
    } catch (e) {
      fs.mkdirSync(dir, {recursive: true});
      fs.writeFileSync(path.join(dir, 'error.txt'), String(e.message));
    }
  }
}

// ONNX Runtime names its trace DIR/ort_profile_<date and time>.json.
const kProfilePrefix = 'ort_profile';

function profileOptions(dir) {
  if (!dir) return {};
  fs.mkdirSync(dir, {recursive: true});
  return {enableProfiling: true, profileFilePrefix: path.join(dir, kProfilePrefix)};
}

// Each node's median kernel time over the runs of the newest trace in
// `dir`, in the order the nodes first ran.
function nodeTimes(session, dir) {
  session.endProfiling();
  const traces = fs.readdirSync(dir)
      .filter((f) => f.startsWith(kProfilePrefix) && f.endsWith('.json'))
      .map((f) => path.join(dir, f))
      .sort((a, b) => fs.statSync(a).mtimeMs - fs.statSync(b).mtimeMs);
  if (!traces.length) throw new Error(`ONNX Runtime wrote no trace into ${dir}`);
  const times = new Map();
  for (const e of JSON.parse(fs.readFileSync(traces[traces.length - 1], 'utf8'))) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const node = e.name.slice(0, -'_kernel_time'.length);
    if (!times.has(node)) times.set(node, {op: e.args.op_name, durations: []});
    times.get(node).durations.push(e.dur * 1e-6);
  }
  return [...times].map(([node, {op, durations}]) => {
    const d = durations.sort((a, b) => a - b);
    const mid = d.length >> 1;
    return {node, op, median_s: d.length % 2 ? d[mid] : (d[mid - 1] + d[mid]) / 2};
  });
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv[0] === '--manifest') {
    const out = argv.indexOf('--output-dir');
    if (out < 0) throw new Error('--manifest needs --output-dir');
    return runManifest(argv[1], argv[out + 1]);
  }
  const opts = {inputs: {}, threads: 0, repeat: 1, opt: 'all', json: false, outputDir: '',
    profileDir: ''};
  let model = null;
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--input') {
      const spec = argv[++i];
      const eq = spec.indexOf('=');
      opts.inputs[spec.slice(0, eq)] = spec.slice(eq + 1);
    } else if (a === '--output-dir') opts.outputDir = argv[++i];
    else if (a === '--threads') opts.threads = Number(argv[++i]);
    else if (a === '--repeat') opts.repeat = Number(argv[++i]);
    else if (a === '--opt') opts.opt = argv[++i];
    else if (a === '--json') opts.json = true;
    else if (a === '--profile') opts.profileDir = argv[++i];
    else if (!model) model = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!model) throw new Error('usage: node ort_run.js MODEL.onnx [--input NAME=FILE.npy]...');
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: opts.threads, interOpNumThreads: 1,
    graphOptimizationLevel: opts.opt, executionMode: 'sequential',
    ...profileOptions(opts.profileDir),
  });
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const meta = session.inputMetadata.find((m) => m.name === name) || {name, type: 'float32', shape: []};
    feeds[name] = opts.inputs[name] ? readNpy(opts.inputs[name]) : randomTensor(meta, i);
  });
  let results = await session.run(feeds);  // warm-up
  const latencies = [];
  for (let r = 0; r < opts.repeat; ++r) {
    const t0 = process.hrtime.bigint();
    results = await session.run(feeds);
    latencies.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const profile = opts.profileDir ? nodeTimes(session, opts.profileDir) : null;
  const outputs = [];
  const files = outputFiles(session.outputNames);
  session.outputNames.forEach((name, i) => {
    const t = results[name];
    outputs.push({name, shape: t.dims, dtype: t.type});
    if (opts.outputDir) writeOutput(opts.outputDir, files[i], t);
  });
  const sorted = [...latencies].sort((a, b) => a - b);
  const m = sorted.length;
  const median = m % 2 ? sorted[(m - 1) / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
  if (opts.json) {
    const result = {latency_s: median, latencies_s: latencies, outputs};
    if (profile) result.profile = profile;
    console.log(JSON.stringify(result));
  } else {
    for (const o of outputs) console.log(`${o.name} ${o.dtype} [${o.shape.join(',')}]`);
    if (profile) {
      for (const p of profile) console.log(`${(p.median_s * 1e3).toFixed(3)} ms  ${p.op}  ${p.node}`);
    }
    console.log(`latency ${(median * 1e3).toFixed(3)} ms (median of ${m} runs)`);
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
