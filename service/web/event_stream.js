// Follows a server-sent event stream through fetch() and a stream reader, because EventSource
// cannot send an Authorization header. Calls onEvent({id, type, data}) per event (data parsed as
// JSON when it is), and reconnects with Last-Event-ID when the connection drops before the
// stream's end, so no event is lost or repeated.
import { ApiError, apiErrorOf, apiFetch } from './api.js';

const RETRY_MS = 1000;
const MAX_RETRIES = 30;

function eventParse(block) {
  const event = { id: '', type: 'message', data: '' };
  const data = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;  // comments keep the connection alive
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') event.id = value;
    else if (field === 'event') event.type = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return null;
  event.data = data.join('\n');
  try {
    event.data = JSON.parse(event.data);
  } catch {
    // Left as text.
  }
  return event;
}

// Resolves when the server ends the stream; rejects with an ApiError on an HTTP error, or when
// the server cannot be reached MAX_RETRIES times in a row.
export async function eventStreamFollow(url, onEvent, { signal } = {}) {
  let lastId = '';
  let failures = 0;
  for (;;) {
    const headers = { Accept: 'text/event-stream' };
    if (lastId) headers['Last-Event-ID'] = lastId;
    try {
      const response = await apiFetch(url, { headers, signal, cache: 'no-store' });
      if (!response.ok) throw await apiErrorOf(response);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;  // the server ends the stream after the last event
        failures = 0;
        buffer += value.replace(/\r\n?/g, '\n');
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = eventParse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (!event) continue;
          if (event.id) lastId = event.id;
          onEvent(event);
        }
      }
    } catch (e) {
      if (e instanceof ApiError || (signal && signal.aborted)) throw e;
      if (++failures > MAX_RETRIES) throw new Error(`lost the event stream: ${e.message}`);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}
