#!/usr/bin/env node
// kiln's compiled CPU engine vs ONNX Runtime (all graph optimizations), side by side on the same
// ONNX files, batch sizes and thread count. For each model and batch it compiles a .kiln with
// `kiln compile`, then runs `kiln bench --json` and bench/peers/ort_bench.js alternately
// (ROUNDS times each, so machine noise hits both) and prints medians and the ratio. With --torch
// it also times the same torchvision architecture in PyTorch (jit optimize_for_inference;
// random weights, which do not change the time of dense kernels). With --bf16 it also compiles
// each model with `--passes default+mixed_precision_bf16` and prints that time and its speed-up
// over ONNX Runtime fp32 (accuracy: `kiln verify MODEL --passes default+mixed_precision_bf16`).
// With --int8 it also compiles `--passes default+quantize_int8` (calibrated on 32 seeded random
// samples: the timing does not depend on the data) and exports the same quantization as a QDQ
// ONNX file with `kiln export`, which ONNX Runtime runs as its int8 peer, in two forms: `ORTq` is
// the same quantization as kiln's plan (a convolution feeding a residual Add keeps a float output,
// which ONNX Runtime then runs as a float Conv on dequantized weights) and `ORTq+` is
// `--qdq-every-output` (every int8 layer's output quantized, residual Adds apart: QLinearConv
// throughout, one more rounding per layer). int8/ORTq compares kiln with the faster of the two.
// Also the int8 speed-up over ONNX Runtime fp32.
//
// Usage: node bench/compare_cpu.js [--models DIR] [--names a,b] [--batches 1,8] [--threads 2]
//                                  [--iters 30] [--rounds 3] [--kiln build/kiln] [--torch] [--bf16] [--int8]
// Models come from the models-test cache (build/model-cache, filled by scripts/test.sh or by
// `python3 tests/models/export_torchvision.py --out build/model-cache`). PyTorch runs under
// Debian's /usr/bin/python3 (KILN_PYTHON overrides).
'use strict';

const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const root = path.resolve(__dirname, '..');

function parseArgs(argv) {
  const opts = {
    models: path.join(root, 'build', 'model-cache'),
    names: ['resnet18', 'resnet50', 'mobilenet_v2', 'efficientnet_b0'],
    batches: [1, 8],
    threads: 2,
    iters: 30,
    rounds: 3,
    kiln: path.join(root, 'build', 'kiln'),
    torch: false,
    bf16: false,
    int8: false,
  };
  for (let i = 0; i < argv.length; ++i) {
    const v = () => argv[++i];
    switch (argv[i]) {
      case '--models': opts.models = v(); break;
      case '--names': opts.names = v().split(','); break;
      case '--batches': opts.batches = v().split(',').map(Number); break;
      case '--threads': opts.threads = Number(v()); break;
      case '--iters': opts.iters = Number(v()); break;
      case '--rounds': opts.rounds = Number(v()); break;
      case '--kiln': opts.kiln = v(); break;
      case '--torch': opts.torch = true; break;
      case '--bf16': opts.bf16 = true; break;
      case '--int8': opts.int8 = true; break;
      default:
        process.stderr.write(`compare_cpu: unknown argument ${argv[i]}\n`);
        process.exit(2);
    }
  }
  return opts;
}

function runJson(cmd, args) {
  const out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return JSON.parse(out);
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)];
};
const fmt = (x, w = 9, d = 2) => x.toFixed(d).padStart(w);

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-compare-'));
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [, 'unknown'])[1];
  console.log(`kiln vs ONNX Runtime (graph optimizations: all), ${opts.threads} threads, ` +
              `${opts.iters} timed runs x ${opts.rounds} alternating rounds; CPU: ${cpu}, ${os.cpus().length} vCPUs`);
  console.log('model              batch  kiln ms   ORT ms  kiln/ORT  kiln ready  ORT ready  kiln 1st   ORT 1st  peak MB' +
              (opts.torch ? '  torch ms  kiln/torch' : '') + (opts.bf16 ? '  bf16 ms  ORT/bf16' : '') +
              (opts.int8 ? '  int8 ms  ORTq ms ORTq+ ms  int8/ORTq  ORT/int8' : ''));
  const ratios = [], bf16_speedups = [], int8_ratios = [], int8_speedups = [];
  for (const name of opts.names) {
    const model = path.join(opts.models, `${name}.onnx`);
    if (!fs.existsSync(model)) {
      console.log(`${name.padEnd(18)} (missing ${model})`);
      continue;
    }
    for (const batch of opts.batches) {
      const compiled = path.join(work, `${name}_b${batch}.kiln`);
      execFileSync(opts.kiln, ['compile', model, '-o', compiled, '--batch', String(batch)], { stdio: 'ignore' });
      const compiled_bf16 = path.join(work, `${name}_b${batch}_bf16.kiln`);
      if (opts.bf16)
        execFileSync(opts.kiln, ['compile', model, '-o', compiled_bf16, '--batch', String(batch), '--passes',
                                 'default+mixed_precision_bf16'], { stdio: 'ignore' });
      const compiled_int8 = path.join(work, `${name}_b${batch}_int8.kiln`);
      const qdq = path.join(work, `${name}_b${batch}_qdq.onnx`);
      const qdq_all = path.join(work, `${name}_b${batch}_qdq_every_output.onnx`);
      if (opts.int8) {
        const quant = ['--batch', String(batch), '--passes', 'default+quantize_int8', '--calibration-random', '32'];
        execFileSync(opts.kiln, ['compile', model, '-o', compiled_int8, ...quant], { stdio: 'ignore' });
        execFileSync(opts.kiln, ['export', model, '-o', qdq, ...quant], { stdio: 'ignore' });
        execFileSync(opts.kiln, ['export', model, '-o', qdq_all, ...quant, '--qdq-every-output'], { stdio: 'ignore' });
      }
      const kiln = [], ort = [], torch = [], bf16 = [], int8 = [], ortq = [], ortq_all = [];
      for (let r = 0; r < opts.rounds; ++r) {
        kiln.push(runJson(opts.kiln, ['bench', compiled, '--threads', String(opts.threads), '--iters',
                                      String(opts.iters), '--json']));
        ort.push(runJson('node', [path.join(__dirname, 'peers', 'ort_bench.js'), model, '--batch', String(batch),
                                  '--threads', String(opts.threads), '--iters', String(opts.iters)]));
        if (opts.torch)
          torch.push(runJson(process.env.KILN_PYTHON || '/usr/bin/python3', [path.join(__dirname, 'peers', 'torch_bench.py'), name, '--batch',
                                         String(batch), '--threads', String(opts.threads), '--iters',
                                         String(opts.iters)]));
        if (opts.bf16)
          bf16.push(runJson(opts.kiln, ['bench', compiled_bf16, '--threads', String(opts.threads), '--iters',
                                        String(opts.iters), '--json']));
        if (opts.int8) {
          int8.push(runJson(opts.kiln, ['bench', compiled_int8, '--threads', String(opts.threads), '--iters',
                                        String(opts.iters), '--json']));
          ortq.push(runJson('node', [path.join(__dirname, 'peers', 'ort_bench.js'), qdq, '--batch', String(batch),
                                     '--threads', String(opts.threads), '--iters', String(opts.iters)]));
          ortq_all.push(runJson('node', [path.join(__dirname, 'peers', 'ort_bench.js'), qdq_all, '--batch',
                                         String(batch), '--threads', String(opts.threads), '--iters', String(opts.iters)]));
        }
      }
      const k = median(kiln.map((x) => x.median_ms)), o = median(ort.map((x) => x.median_ms));
      const t = opts.torch ? median(torch.map((x) => x.median_ms)) : 0;
      const h = opts.bf16 ? median(bf16.map((x) => x.median_ms)) : 0;
      const q = opts.int8 ? median(int8.map((x) => x.median_ms)) : 0;
      const oq_same = opts.int8 ? median(ortq.map((x) => x.median_ms)) : 0;
      const oq_all = opts.int8 ? median(ortq_all.map((x) => x.median_ms)) : 0;
      const oq = Math.min(oq_same, oq_all);
      if (opts.int8) {
        int8_ratios.push(q / oq);
        int8_speedups.push(o / q);
      }
      ratios.push(k / o);
      if (opts.bf16) bf16_speedups.push(o / h);
      console.log(`${name.padEnd(18)} ${String(batch).padStart(5)} ${fmt(k)} ${fmt(o)} ${fmt(k / o, 9)} ` +
                  `${fmt(median(kiln.map((x) => x.ready_ms)), 11, 1)} ${fmt(median(ort.map((x) => x.ready_ms)), 10, 1)} ` +
                  `${fmt(median(kiln.map((x) => x.first_run_ms)), 9, 1)} ${fmt(median(ort.map((x) => x.first_run_ms)), 9, 1)} ` +
                  `${fmt(kiln[0].arena_bytes / 1e6, 8, 1)}` +
                  (opts.torch ? ` ${fmt(t)} ${fmt(k / t, 11)}` : '') + (opts.bf16 ? ` ${fmt(h)} ${fmt(o / h, 9)}` : '') +
                  (opts.int8 ? ` ${fmt(q)} ${fmt(oq_same, 8)} ${fmt(oq_all, 8)} ${fmt(q / oq, 10)} ${fmt(o / q, 9)}` : ''));
    }
  }
  if (ratios.length) {
    const geomean = Math.exp(ratios.reduce((a, r) => a + Math.log(r), 0) / ratios.length);
    console.log(`geometric mean kiln/ORT over ${ratios.length} cases: ${geomean.toFixed(3)}; ` +
                `worst ${Math.max(...ratios).toFixed(2)}`);
  }
  if (bf16_speedups.length)
    console.log(`kiln bf16 speed-up over ONNX Runtime fp32: geometric mean ` +
                `${Math.exp(bf16_speedups.reduce((a, r) => a + Math.log(r), 0) / bf16_speedups.length).toFixed(2)}x, ` +
                `lowest ${Math.min(...bf16_speedups).toFixed(2)}x`);
  if (int8_ratios.length)
    console.log(`kiln int8 / ONNX Runtime on kiln's QDQ export (the faster form): geometric mean ` +
                `${Math.exp(int8_ratios.reduce((a, r) => a + Math.log(r), 0) / int8_ratios.length).toFixed(3)}, ` +
                `worst ${Math.max(...int8_ratios).toFixed(2)}; int8 speed-up over ORT fp32: geometric mean ` +
                `${Math.exp(int8_speedups.reduce((a, r) => a + Math.log(r), 0) / int8_speedups.length).toFixed(2)}x, ` +
                `lowest ${Math.min(...int8_speedups).toFixed(2)}x`);
  console.log('ms = median latency per batch; peak MB = kiln\'s planned activation arena; ready = load/compile-free start-up to a runnable session ' +
              '(kiln: mmap .kiln + engine create; ORT: InferenceSession.create incl. its graph optimization); ' +
              '1st = first run.');
  fs.rmSync(work, { recursive: true, force: true });
}

main();
