#!/usr/bin/env node
// ONNX Runtime peer for kiln's accuracy comparisons: runs one model on a float32 .npy input (its
// first input; the batch is the array's) and writes its first output as a float32 .npy, so a
// script can set ONNX Runtime's outputs beside kiln's (bench/int8_peer_accuracy.py).
//
// Usage: node bench/peers/ort_run.js MODEL.onnx INPUT.npy OUTPUT.npy [--threads T]
'use strict';

const fs = require('fs');
const path = require('path');

function fail(message, code = 2) {
  process.stderr.write(`ort_run: ${message}\n`);
  process.exit(code);
}

// NumPy format 1.0/2.0, little-endian float32, C order: what numpy.save writes by default.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') fail(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + headerLen;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  if (!/'descr':\s*'<f4'/.test(header)) fail(`${file}: only little-endian float32 arrays are read (${header.trim()})`);
  if (/'fortran_order':\s*True/.test(header)) fail(`${file}: Fortran order is not read`);
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!shapeText) fail(`${file}: no shape in the header`);
  const shape = shapeText[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  if (buf.length - start !== count * 4) fail(`${file}: ${buf.length - start} data bytes for shape (${shape})`);
  const data = new Float32Array(count);
  for (let i = 0; i < count; ++i) data[i] = buf.readFloatLE(start + 4 * i);
  return { shape, data };
}

function writeNpy(file, shape, data) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(data.length * 4);
  for (let i = 0; i < data.length; ++i) body.writeFloatLE(data[i], 4 * i);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

async function main() {
  const args = process.argv.slice(2);
  let threads = 2;
  const positional = [];
  for (let i = 0; i < args.length; ++i) {
    if (args[i] === '--threads') threads = Number(args[++i]);
    else if (args[i].startsWith('--')) fail(`unknown option ${args[i]}`);
    else positional.push(args[i]);
  }
  if (positional.length !== 3) fail('usage: ort_run.js MODEL.onnx INPUT.npy OUTPUT.npy [--threads T]');
  if (!Number.isInteger(threads) || threads < 1) fail('--threads must be a positive integer');
  const [model, input, output] = positional;
  let ort;
  try {
    ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    fail('onnxruntime-node is not installed; run (cd bench/peers && npm install --ignore-scripts)', 77);
  }
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: 'all', intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
  });
  const x = readNpy(input);
  const result = await session.run({ [session.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) });
  const y = result[session.outputNames[0]];
  if (y.type !== 'float32') fail(`output '${session.outputNames[0]}' is ${y.type}, not float32`, 1);
  writeNpy(output, y.dims, y.data);
}

main().catch((e) => fail(e.message, 1));
