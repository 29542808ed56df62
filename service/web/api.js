// Calls to kiln's API from the page. The optional bearer token lives in sessionStorage (this tab
// only) and goes in an Authorization header, never in a URL.

const TOKEN_KEY = 'kiln.apiToken';

export function tokenGet() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function tokenSet(token) {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export function apiFetch(path, options = {}) {
  const headers = new Headers(options.headers || {});
  const token = tokenGet();
  if (token) headers.set('Authorization', 'Bearer ' + token);
  return fetch(path, { ...options, headers });
}

// An API error: the status and the body's {error: {code, message, details[]}}.
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

// From an error answer's status and text; a body that is not the API's (a proxy's page, say)
// leaves the status line.
function apiErrorFrom(status, statusText, text) {
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // Not JSON.
  }
  // The HTTP layer's own rejections (413 for the whole body, 431) carry {"error": "message"}.
  const e = body && body.error ? (typeof body.error === 'string' ? { message: body.error } : body.error) : {};
  const message = typeof e.message === 'string' ? e.message : `HTTP ${status} ${statusText}`;
  return new ApiError(status, e.code || '', message, Array.isArray(e.details) ? e.details : []);
}

export async function apiErrorOf(response) {
  return apiErrorFrom(response.status, response.statusText, await response.text());
}

// POSTs a form with upload progress (fetch() reports none, and models can be large): calls
// onProgress(fraction) while sending; resolves with the JSON answer, rejects with an ApiError.
export function apiUpload(path, form, onProgress) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open('POST', path);
    const token = tokenGet();
    if (token) request.setRequestHeader('Authorization', 'Bearer ' + token);
    request.upload.addEventListener('progress', (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    request.addEventListener('load', () => {
      if (request.status >= 200 && request.status < 300) {
        try {
          return resolve(JSON.parse(request.responseText));
        } catch {
          // Falls through to the error.
        }
      }
      reject(apiErrorFrom(request.status, request.statusText, request.responseText));
    });
    request.addEventListener('error', () =>
      reject(new Error('no answer from the server (it is down, or it closed the connection on a body over its limit)')));
    request.send(form);
  });
}

export async function apiJson(path, options = {}) {
  const response = await apiFetch(path, options);
  if (!response.ok) throw await apiErrorOf(response);
  return response.json();
}

// Saves a file the API serves. A plain link would do without a token, but a link cannot carry
// the Authorization header, so the bytes are fetched and handed to the browser as a blob.
export async function apiDownload(path, name) {
  const response = await apiFetch(path);
  if (!response.ok) throw await apiErrorOf(response);
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
