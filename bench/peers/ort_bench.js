#!/usr/bin/env node
// ONNX Runtime peer for kiln's benchmarks: times one model the way `kiln bench --json` does
// (seeded uniform inputs, warm-up, then median/p90/min of timed runs) and prints the same JSON
// fields, so bench/compare_cpu.sh can put the two side by side.
//
// Usage: node bench/peers/ort_bench.js MODEL.onnx --batch N [--threads T] [--iters K]
//        [--warmup W] [--opt all|basic|extended|disabled]
// Needs onnxruntime-node in bench/peers/node_modules:
//   (cd bench/peers && npm install --ignore-scripts onnxruntime-node@1.30.0)
'use strict';

const path = require('path');

function usage(message) {
  process.stderr.write(`ort_bench: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { model: null, batch: 1, threads: 2, iters: 50, warmup: 5, opt: 'all' };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--batch') opts.batch = Number(value());
    else if (arg === '--threads') opts.threads = Number(value());
    else if (arg === '--iters') opts.iters = Number(value());
    else if (arg === '--warmup') opts.warmup = Number(value());
    else if (arg === '--opt') opts.opt = value();
    else if (arg.startsWith('--')) usage(`unknown option ${arg}`);
    else opts.model = arg;
  }
  if (!opts.model) usage('missing MODEL.onnx');
  for (const key of ['batch', 'threads', 'iters'])
    if (!Number.isInteger(opts[key]) || opts[key] < 1) usage(`--${key} must be a positive integer`);
  return opts;
}

// Same generator family as kiln bench (seeded, uniform in [-1, 1)); exact values do not matter
// for timing, only that both runtimes see dense non-trivial data.
function seededUniform(count, seed) {
  const data = new Float32Array(count);
  let state = seed >>> 0;
  for (let i = 0; i < count; ++i) {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    data[i] = (state / 4294967296) * 2 - 1;
  }
  return data;
}

function percentile(sorted, p) {
  const i = Math.round(p * (sorted.length - 1));
  return sorted[Math.min(i, sorted.length - 1)];
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  } catch (e) {
    process.stderr.write('ort_bench: onnxruntime-node is not installed; run ' +
                         '(cd bench/peers && npm install --ignore-scripts onnxruntime-node@1.30.0)\n');
    process.exit(77);
  }

  const started = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(opts.model, {
    graphOptimizationLevel: opts.opt,
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const feeds = {};
  let seed = 1;
  for (const name of session.inputNames) {
    const meta = session.inputMetadata ? session.inputMetadata.find((m) => m.name === name) : null;
    let dims = meta && meta.shape ? meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : opts.batch))
                                  : [opts.batch, 3, 224, 224];
    dims[0] = opts.batch;
    const count = dims.reduce((a, b) => a * b, 1);
    feeds[name] = new ort.Tensor('float32', seededUniform(count, seed++), dims);
  }
  const readyMs = Number(process.hrtime.bigint() - started) / 1e6;
  const firstStart = process.hrtime.bigint();
  await session.run(feeds);  // the first run pays for lazy initialisation: reported on its own
  const firstRunMs = Number(process.hrtime.bigint() - firstStart) / 1e6;

  for (let i = 0; i < opts.warmup; ++i) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < opts.iters; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ms.sort((a, b) => a - b);
  const median = percentile(ms, 0.5);
  process.stdout.write(JSON.stringify({
    runtime: `onnxruntime-node ${require(path.join(__dirname, 'node_modules', 'onnxruntime-node', 'package.json')).version}`,
    model: opts.model, batch: opts.batch, threads: opts.threads, iters: opts.iters, warmup: opts.warmup,
    graph_optimization: opts.opt, median_ms: median, p90_ms: percentile(ms, 0.9), min_ms: ms[0],
    throughput_per_s: (opts.batch * 1000) / median, ready_ms: readyMs, first_run_ms: firstRunMs,
  }, null, 2) + '\n');
}

main().catch((e) => {
  process.stderr.write(`ort_bench: ${e.message}\n`);
  process.exit(1);
});
