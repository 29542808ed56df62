// The web form: builds the job's multipart request (description, target, model, calibration,
// validation) from the fields, submits it, shows the API's errors next to the fields they name,
// follows the job's events to a progress bar and stage list, and shows the HTML report.
// A job being watched is named in the URL (#job=ID), so a reload, or a link, shows it again.
import { apiDownload, apiErrorOf, apiFetch, apiJson, apiUpload, ApiError, tokenGet, tokenSet } from './api.js';
import { descriptionBuild, documentText, nameFromFile, targetBuild } from './documents.js';
import { eventStreamFollow } from './event_stream.js';
import { onnxInputsRead } from './onnx_inputs.js';

const $ = (id) => document.getElementById(id);
const DTYPES = ['float32', 'float16', 'bfloat16', 'int8', 'uint8', 'int32', 'int64', 'bool'];

// ---- form state -------------------------------------------------------------------------------

let nameFromModel = true;  // the job name follows the model's file name until the user types one
const edited = { description: false, target: false };

function targetMode() {
  return document.querySelector('input[name=target-mode]:checked').value;
}

function inputRowAdd(input = { name: '', shape: '', dtype: 'float32' }) {
  const index = $('inputs-rows').children.length;
  const row = document.createElement('tr');
  const cell = (control, label) => {
    control.setAttribute('aria-label', label);
    const td = document.createElement('td');
    td.append(control);
    row.append(td);
    return control;
  };
  const name = cell(document.createElement('input'), `input ${index + 1} name`);
  name.type = 'text';
  name.className = 'input-name';
  name.value = input.name;
  const shape = cell(document.createElement('input'), `input ${index + 1} shape`);
  shape.type = 'text';
  shape.className = 'input-shape';
  shape.value = Array.isArray(input.shape) ? input.shape.join(', ') : input.shape;
  const dtype = cell(document.createElement('select'), `input ${index + 1} type`);
  dtype.className = 'input-dtype';
  for (const t of DTYPES) dtype.append(new Option(t, t, false, t === input.dtype));
  const remove = document.createElement('button');
  remove.type = 'button';
  remove.className = 'secondary';
  remove.textContent = 'Remove';
  remove.setAttribute('aria-label', `remove input ${index + 1}`);
  remove.addEventListener('click', () => {
    row.remove();
    documentsRefresh();
  });
  const td = document.createElement('td');
  td.append(remove);
  row.append(td);
  $('inputs-rows').append(row);
}

function formDescription() {
  const inputs = [...$('inputs-rows').children].map((row) => ({
    name: row.querySelector('.input-name').value.trim(),
    shape: row.querySelector('.input-shape').value,
    dtype: row.querySelector('.input-dtype').value,
  }));
  return descriptionBuild({
    name: $('job-name').value.trim(),
    inputs,
    objective: document.querySelector('input[name=objective]:checked').value,
    constraints: {
      max_latency_ms: $('max-latency').value,
      min_throughput_per_s: $('min-throughput').value,
      max_accuracy_drop: $('max-accuracy-drop').value,
      max_memory_mb: $('max-memory').value,
      max_cost_per_million: $('max-cost').value,
    },
    precisions: [...document.querySelectorAll('input[name=precision]:checked')].map((c) => c.value),
    batchSizes: $('batch-sizes').value,
    calibration: $('calibration-file').files.length > 0,
    validation: $('validation-file').files.length > 0,
    registeredTarget: targetMode() === 'registered' ? $('target-registered-name').value : '',
  });
}

function formTarget() {
  return targetBuild({
    name: $('target-name').value,
    kind: $('target-kind').value,
    scheduler: $('target-scheduler').value,
    runtime: $('target-runtime').value,
    nodes: $('target-nodes').value,
    cpuModel: $('target-cpu-model').value,
    cores: $('target-cores').value,
    memoryGb: $('target-memory').value,
    gpuCount: $('target-gpu-count').value,
    gpuModel: $('target-gpu-model').value,
    gpuMemoryGb: $('target-gpu-memory').value,
    price: $('target-price').value,
    partition: $('target-partition').value,
    namespace: $('target-namespace').value,
  });
}

// Regenerates the documents the user has not edited by hand, and shows the panels that apply.
function documentsRefresh() {
  const mode = targetMode();
  $('target-describe').hidden = mode !== 'describe';
  $('target-upload').hidden = mode !== 'upload';
  $('target-registered').hidden = mode !== 'registered';
  $('target-doc-field').hidden = mode !== 'describe';
  const scheduler = $('target-scheduler').value;
  $('target-partition-field').hidden = scheduler !== 'slurm';
  $('target-namespace-field').hidden = scheduler !== 'kubernetes';
  const gpus = Number($('target-gpu-count').value) > 0;
  for (const field of document.querySelectorAll('.gpu-only')) field.hidden = !gpus;
  if (!edited.description) $('description-doc').value = documentText(formDescription());
  if (!edited.target) $('target-doc').value = documentText(formTarget());
  $('description-regenerate').hidden = !edited.description;
  $('target-regenerate').hidden = !edited.target;
}

async function modelChosen() {
  const file = $('model-file').files[0];
  fieldErrorClear('model-file');
  if (!file) return;
  if (nameFromModel) $('job-name').value = nameFromFile(file.name);
  try {
    const inputs = await onnxInputsRead(file);
    if (inputs === null) {
      $('model-file-help').textContent = 'The model is too large to read here: enter its inputs below.';
    } else {
      $('inputs-rows').replaceChildren();
      for (const input of inputs) inputRowAdd(input);
      if (inputs.length === 0) inputRowAdd();
      const count = `${inputs.length} input${inputs.length === 1 ? '' : 's'}`;
      $('model-file-help').textContent = `Read ${count} from the model; check the shapes below.`;
    }
  } catch (e) {
    fieldErrorShow('model-file', `This file does not read as an ONNX model (${e.message}).`);
  }
  documentsRefresh();
}

// ---- registered targets -----------------------------------------------------------------------

async function registeredTargetsLoad() {
  const select = $('target-registered-name');
  const radio = $('target-mode-registered');
  const help = $('target-registered-help');
  select.replaceChildren();
  let response;
  try {
    response = await apiFetch('/v1/targets');
  } catch {
    response = null;
  }
  if (response && response.ok) {
    const body = await response.json();
    const targets = Array.isArray(body.targets) ? body.targets : [];
    for (const t of targets) select.append(new Option(`${t.name} (${t.kind})`, t.name));
    radio.disabled = targets.length === 0;
    help.textContent = targets.length ? '' : 'No target is registered with this server yet.';
  } else {
    radio.disabled = true;
    const status = response ? response.status : 0;
    help.textContent =
      status === 401 || status === 403
        ? 'Listing the registered targets needs an API token (see "API token" above).'
        : status === 404
          ? 'This server has no target registry.'
          : 'The registered targets cannot be listed right now.';
  }
  radio.closest('label').title = radio.disabled ? help.textContent : '';
  if (radio.disabled && radio.checked) document.querySelector('input[name=target-mode][value=describe]').checked = true;
  documentsRefresh();
}

// ---- errors next to their fields --------------------------------------------------------------

// API error details {part, pointer} → the form field they concern; the longest pointer prefix
// wins. A hand-edited document, or an uploaded target, takes its errors itself.
const FIELDS = {
  description: [
    ['/name', 'job-name'],
    ['/inputs', 'inputs'],
    ['/objective', 'objective'],
    ['/constraints/max_latency_ms', 'max-latency'],
    ['/constraints/min_throughput_per_s', 'min-throughput'],
    ['/constraints/max_accuracy_drop', 'max-accuracy-drop'],
    ['/constraints/max_memory_mb', 'max-memory'],
    ['/constraints/max_cost_per_million', 'max-cost'],
    ['/optimizations/precisions', 'precisions'],
    ['/optimizations/batch_sizes', 'batch-sizes'],
    ['/data/calibration', 'calibration-file'],
    ['/data/validation', 'validation-file'],
    ['/target', 'target-registered-name'],
  ],
  target: [
    ['/name', 'target-name'],
    ['/kind', 'target-kind'],
    ['/scheduler', 'target-scheduler'],
    ['/container_runtime', 'target-runtime'],
    ['/nodes', 'target-nodes'],
    ['/price_per_node_hour', 'target-price'],
    ['/node/cpu/model', 'target-cpu-model'],
    ['/node/cpu/cores', 'target-cores'],
    ['/node/memory_gb', 'target-memory'],
    ['/node/gpus/0/model', 'target-gpu-model'],
    ['/node/gpus/0/count', 'target-gpu-count'],
    ['/node/gpus/0/memory_gb', 'target-gpu-memory'],
    ['/node/gpus', 'target-gpu-count'],
    ['/slurm', 'target-partition'],
    ['/kubernetes', 'target-namespace'],
  ],
};

function fieldOf(part, pointer) {
  if (part === 'model') return 'model-file';
  if (part === 'calibration') return 'calibration-file';
  if (part === 'validation') return 'validation-file';
  if (part === 'target') {
    if (targetMode() === 'upload') return 'target-file';
    if (targetMode() === 'registered') return 'target-registered-name';
    if (edited.target) return 'target-doc';
  }
  if (part === 'description' && edited.description) return 'description-doc';
  let best = null;
  for (const [prefix, field] of FIELDS[part] || []) {
    const matches = pointer === prefix || (pointer || '').startsWith(prefix + '/');
    if (matches && (!best || prefix.length > best[0].length)) best = [prefix, field];
  }
  if (best) return best[1];
  return part === 'target' ? 'target-doc' : part === 'description' ? 'description-doc' : null;
}

function fieldErrorShow(field, message) {
  const error = $(`${field}-error`);
  error.textContent = error.hidden ? message : `${error.textContent} ${message}`;
  error.hidden = false;
  const control = $(field);
  if (control && control.matches('input, select, textarea')) control.setAttribute('aria-invalid', 'true');
  if (field === 'description-doc' || field === 'target-doc') $('documents').open = true;
}

function fieldErrorClear(field) {
  const error = $(`${field}-error`);
  error.hidden = true;
  error.textContent = '';
  const control = $(field);
  if (control) control.removeAttribute('aria-invalid');
}

function errorsClear() {
  for (const error of document.querySelectorAll('#job-form .field-error, #api-token-error')) {
    error.hidden = true;
    error.textContent = '';
  }
  for (const control of document.querySelectorAll('[aria-invalid]')) control.removeAttribute('aria-invalid');
  $('form-errors').hidden = true;
  $('form-error-list').replaceChildren();
}

function errorsShow(error) {
  const list = $('form-error-list');
  const item = (text, field) => {
    const li = document.createElement('li');
    if (field) {
      const link = document.createElement('a');
      link.href = `#${field}`;
      link.textContent = text;
      link.addEventListener('click', (event) => {
        event.preventDefault();
        let target = $(field);
        if (!target || !target.matches('input, select, textarea, button')) {
          target = $(`${field}-error`);
          target.tabIndex = -1;
        }
        target.focus();
      });
      li.append(link);
    } else {
      li.textContent = text;
    }
    list.append(li);
  };
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
    $('access').open = true;
    fieldErrorShow('api-token', error.message);
    item(error.message, 'api-token');
  } else if (error instanceof ApiError && error.details.length > 0) {
    item(error.message, null);
    for (const d of error.details) {
      const field = fieldOf(d.part, d.pointer);
      const where = d.pointer ? `${d.pointer}: ` : '';
      if (field) fieldErrorShow(field, where + d.message);
      item(`${d.part || 'request'} ${where}${d.message}`, field);
    }
  } else {
    // 413 and the like say which part in their message only; a whole body over the server's
    // limit is the model's doing.
    const part = /part '([a-z]+)'/.exec(error.message || '');
    const field = part ? fieldOf(part[1], '') : error.status === 413 ? 'model-file' : null;
    if (field) fieldErrorShow(field, error.message);
    item(error.message, field);
  }
  $('form-errors').hidden = false;
  $('form-errors').focus();
}

// ---- submit -----------------------------------------------------------------------------------

function requestBuild() {
  const body = new FormData();
  body.append('description', new Blob([$('description-doc').value], { type: 'application/json' }), 'description.json');
  const mode = targetMode();
  if (mode === 'describe') body.append('target', new Blob([$('target-doc').value], { type: 'application/json' }), 'target.json');
  if (mode === 'upload' && $('target-file').files[0]) body.append('target', $('target-file').files[0]);
  if ($('model-file').files[0]) body.append('model', $('model-file').files[0]);
  if ($('calibration-file').files[0]) body.append('calibration', $('calibration-file').files[0]);
  if ($('validation-file').files[0]) body.append('validation', $('validation-file').files[0]);
  return body;
}

async function submit(event) {
  event.preventDefault();
  errorsClear();
  const button = $('submit');
  button.disabled = true;
  button.textContent = 'Uploading…';
  try {
    const accepted = await apiUpload('/v1/jobs', requestBuild(), (fraction) => {
      button.textContent = `Uploading… ${Math.round(100 * fraction)}%`;
    });
    history.pushState(null, '', `#job=${encodeURIComponent(accepted.id)}`);
    jobWatch(accepted.id);
  } catch (e) {
    errorsShow(e instanceof ApiError ? e : new ApiError(0, '', `The upload failed: ${e.message}.`, []));
  } finally {
    button.disabled = false;
    button.textContent = 'Optimize';
  }
}

// ---- progress ---------------------------------------------------------------------------------

let watch = null;  // {id, stages: [{name, state, seconds}], abort}

function progressRender(progress, state) {
  const percent = Math.round(progress);
  $('job-progress').value = percent;
  $('job-progress-text').textContent = `${percent}%`;
  if (state) {
    $('job-state').textContent = state;
    $('job-state').className = `state state-${state}`;
  }
}

function stagesRender() {
  const list = $('stage-list');
  list.replaceChildren();
  for (const s of watch.stages) {
    const li = document.createElement('li');
    li.dataset.stage = s.name;
    li.dataset.state = s.state;
    const name = document.createElement('span');
    name.textContent = `${s.name}: `;
    const state = document.createElement('span');
    state.className = `state state-${s.state}`;
    state.textContent = s.state + (typeof s.seconds === 'number' && s.state !== 'running' ? ` (${s.seconds.toFixed(1)} s)` : '');
    li.append(name, state);
    if (s.message) li.append(` — ${s.message}`);
    if (s.state === 'running') li.setAttribute('aria-current', 'step');
    list.append(li);
  }
  const finished = watch.stages.filter((s) => s.state === 'done' || s.state === 'skipped').length;
  return watch.stages.length ? (100 * finished) / watch.stages.length : 0;
}

function jobRender(job) {
  watch.stages = job.stages.map((s) => ({ ...s }));
  stagesRender();
  progressRender(job.progress, job.state);
  $('job-cancel').hidden = job.state !== 'queued' && job.state !== 'running';
  if (job.error) {
    $('job-status').textContent = job.error;
    $('job-status').className = 'status error';
  }
}

function eventApply(event) {
  const data = event.data;
  if (!data || typeof data !== 'object') return;
  // progress and log events are in the contract (JobEvent); the server sends them once stages
  // report from inside.
  if (event.type === 'progress' && typeof data.progress === 'number') progressRender(data.progress, 'running');
  if (event.type === 'log' && typeof data.message === 'string') $('job-status').textContent = data.message;
  if (event.type === 'stage') {
    const stage = watch.stages.find((s) => s.name === data.stage);
    if (stage) {
      stage.state = data.state;
      if (data.message) stage.message = data.message;
    }
    progressRender(stagesRender(), 'running');
    $('job-status').textContent = `${data.stage}: ${data.state}`;
  }
}

async function jobWatch(id) {
  if (watch && watch.abort) watch.abort.abort();
  watch = { id, stages: [], abort: new AbortController() };
  const mine = watch;
  $('progress-section').hidden = false;
  $('report-section').hidden = true;
  $('report-view').replaceChildren();
  $('job-id').textContent = id;
  $('job-status').textContent = 'Queued…';
  $('job-status').className = 'status';
  const base = `/v1/jobs/${encodeURIComponent(id)}`;
  try {
    jobRender(await apiJson(base));
    $('progress-heading').focus();  // keyboard and screen-reader users continue here
    let job;
    for (;;) {
      await eventStreamFollow(`${base}/events`, eventApply, { signal: mine.abort.signal });
      // The stream can end before the job does when the server stops: then the job is read
      // again once the server is back (the event stream waits for it), and followed further.
      job = await apiJson(base).catch((e) => {
        if (e instanceof ApiError) throw e;
        return null;
      });
      if (watch !== mine) return;  // another job is shown now
      if (job && ['succeeded', 'failed', 'cancelled'].includes(job.state)) break;
      $('job-status').textContent = 'Waiting for the server…';
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
    jobRender(job);
    const outcome = { succeeded: 'Done.', failed: 'The job failed', cancelled: 'The job was cancelled' }[job.state];
    $('job-status').textContent = job.error ? `${outcome}: ${job.error}` : outcome;
    recentJobsLoad();
    if (job.state === 'succeeded') await reportShow(id);
  } catch (e) {
    if (mine.abort.signal.aborted) return;
    $('job-status').textContent = e.message;
    $('job-status').className = 'status error';
  }
}

// ---- report -----------------------------------------------------------------------------------

async function reportShow(id) {
  const base = `/v1/jobs/${encodeURIComponent(id)}/report`;
  const response = await apiFetch(`${base}?format=html`);
  if (!response.ok) throw await apiErrorOf(response);
  // The server escaped every value; the parsed page runs no script (DOMParser) and only its
  // <main> is taken over.
  const page = new DOMParser().parseFromString(await response.text(), 'text/html');
  const report = page.getElementById('report');
  const title = report.querySelector('h2');
  $('report-heading').textContent = `Report: ${title ? title.textContent : id}`;
  if (title) title.remove();
  const view = $('report-view');
  view.className = 'report';
  view.replaceChildren(...[...report.childNodes].map((node) => document.importNode(node, true)));
  for (const link of view.querySelectorAll('a.artifact')) {
    link.addEventListener('click', (event) => {
      if (!tokenGet()) return;  // a plain link works without a token
      event.preventDefault();
      apiDownload(link.getAttribute('href'), link.textContent).catch((e) => {
        $('job-status').textContent = `Download failed: ${e.message}`;
      });
    });
  }
  $('report-link').href = `${base}?format=html`;
  $('report-json-link').href = base;
  $('report-link').parentElement.hidden = Boolean(tokenGet());  // new tabs cannot send the token
  $('report-section').hidden = false;
}

// ---- recent jobs ------------------------------------------------------------------------------

// The last jobs, each a link to #job=ID; hidden when the list cannot be read (no token yet).
async function recentJobsLoad() {
  let jobs = [];
  try {
    jobs = (await apiJson('/v1/jobs?limit=10')).jobs || [];
  } catch {
    jobs = [];
  }
  const list = $('jobs-list');
  list.replaceChildren();
  for (const job of jobs) {
    const li = document.createElement('li');
    const link = document.createElement('a');
    link.href = `#job=${encodeURIComponent(job.id)}`;
    link.textContent = job.name;
    const state = document.createElement('span');
    state.className = `state state-${job.state}`;
    state.textContent = job.state;
    li.append(link, ' ', state, ` — ${job.created_at}`);
    list.append(li);
  }
  $('jobs-section').hidden = jobs.length === 0;
}

// ---- wiring -----------------------------------------------------------------------------------

function jobFromLocation() {
  const match = /^#job=([A-Za-z0-9_-]{1,64})$/.exec(location.hash);
  if (match) jobWatch(match[1]);
}

function init() {
  $('api-token').value = tokenGet();
  $('api-token').addEventListener('change', () => {
    tokenSet($('api-token').value.trim());
    fieldErrorClear('api-token');
    registeredTargetsLoad();
    recentJobsLoad();
  });
  $('model-file').addEventListener('change', modelChosen);
  $('job-name').addEventListener('input', () => {
    nameFromModel = $('job-name').value === '';
  });
  $('input-add').addEventListener('click', () => {
    inputRowAdd();
    documentsRefresh();
  });
  for (const which of ['description', 'target']) {
    $(`${which}-doc`).addEventListener('input', () => {
      edited[which] = true;
      $(`${which}-regenerate`).hidden = false;
    });
    $(`${which}-regenerate`).addEventListener('click', () => {
      edited[which] = false;
      documentsRefresh();
    });
  }
  // Any change to a field regenerates the documents (the textareas' own edits excepted).
  for (const type of ['input', 'change']) {
    $('job-form').addEventListener(type, (event) => {
      if (event.target.id !== 'description-doc' && event.target.id !== 'target-doc') documentsRefresh();
    });
  }
  $('job-form').addEventListener('submit', submit);
  $('job-cancel').addEventListener('click', async () => {
    if (!watch) return;
    try {
      jobRender(await apiJson(`/v1/jobs/${encodeURIComponent(watch.id)}`, { method: 'DELETE' }));
    } catch (e) {
      $('job-status').textContent = e.message;
    }
  });
  window.addEventListener('hashchange', jobFromLocation);
  inputRowAdd();
  documentsRefresh();
  registeredTargetsLoad();
  recentJobsLoad();
  jobFromLocation();
}

init();
