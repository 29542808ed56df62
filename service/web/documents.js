// The two documents a job is submitted with, built from the form's values: the application
// description and the target (api/schemas/*.schema.json). Pure functions of a plain object; the
// server validates, and its errors point back at the fields by JSON pointer (see app.js).

// '' → undefined (left out); anything else a number, or the text itself when it is not one, so
// that the server names the field instead of the form dropping it silently.
function numberOrText(text) {
  const t = String(text).trim();
  if (t === '') return undefined;
  const n = Number(t);
  return Number.isFinite(n) ? n : t;
}

// "batch, 1, 28, 28" → ['batch', 1, 28, 28]
export function shapeParse(text) {
  return String(text)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((s) => (/^[0-9]+$/.test(s) ? Number(s) : s));
}

function withoutEmpty(object) {
  const out = {};
  for (const [key, value] of Object.entries(object)) if (value !== undefined) out[key] = value;
  return Object.keys(out).length ? out : undefined;
}

// A job name from a model file name: "Fashion MNIST.onnx" → "fashion-mnist".
export function nameFromFile(fileName) {
  const name = fileName
    .replace(/\.onnx$/i, '')
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '')
    .slice(0, 63);
  return name || 'model';
}

// form: {name, inputs: [{name, shape, dtype}], objective, constraints: {max_latency_ms, ...} as
// text, precisions: [...], batchSizes (text), calibration, validation (booleans: files chosen),
// registeredTarget (name or '')}
export function descriptionBuild(form) {
  const inputs = {};
  for (const input of form.inputs) {
    if (input.name === '') continue;
    inputs[input.name] = { shape: shapeParse(input.shape), dtype: input.dtype };
  }
  const constraints = {};
  for (const [key, text] of Object.entries(form.constraints)) constraints[key] = numberOrText(text);
  const batchSizes = shapeParse(form.batchSizes);
  const description = {
    name: form.name,
    task: 'inference',
    model: { path: 'model.onnx' },
    inputs,
    data: withoutEmpty({
      calibration: form.calibration ? 'calibration.npz' : undefined,
      validation: form.validation ? 'validation.npz' : undefined,
    }),
    objective: form.objective,
    constraints: withoutEmpty(constraints),
    optimizations: withoutEmpty({
      precisions: form.precisions,
      batch_sizes: batchSizes.length ? batchSizes : undefined,
    }),
    target: form.registeredTarget || undefined,
  };
  return withoutEmpty(description);
}

// form: {name, kind, scheduler, runtime, nodes, cpuModel, cores, memoryGb, gpuCount, gpuModel,
// gpuMemoryGb, price, partition, namespace} as entered (text).
export function targetBuild(form) {
  const gpuCount = numberOrText(form.gpuCount);
  const gpus =
    gpuCount === undefined || gpuCount === 0
      ? undefined
      : [{ model: form.gpuModel.trim() || 'unspecified', count: gpuCount, memory_gb: numberOrText(form.gpuMemoryGb) }];
  return withoutEmpty({
    name: form.name.trim(),
    kind: form.kind,
    scheduler: form.scheduler,
    container_runtime: form.runtime,
    nodes: numberOrText(form.nodes),
    price_per_node_hour: numberOrText(form.price),
    node: {
      cpu: { model: form.cpuModel.trim() || 'unspecified', cores: numberOrText(form.cores) },
      memory_gb: numberOrText(form.memoryGb),
      gpus,
    },
    slurm: form.scheduler === 'slurm' ? withoutEmpty({ partition: form.partition.trim() || undefined }) : undefined,
    kubernetes: form.scheduler === 'kubernetes' ? withoutEmpty({ namespace: form.namespace.trim() || undefined }) : undefined,
  });
}

export function documentText(document) {
  return JSON.stringify(document, null, 2) + '\n';
}
