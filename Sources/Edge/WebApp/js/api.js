// The edge's JSON API: POST /v1/<service>/<Rpc>, errors as {code, name, message}.
const TOKEN = "frienso.session";

export class APIError extends Error {
  constructor(status, body) {
    super(body?.message || `HTTP ${status}`);
    this.status = status;
    this.name = body?.name || "HTTP_ERROR";
    this.code = body?.code;
  }
}

export const session = {
  get token() { return localStorage.getItem(TOKEN); },
  set token(value) { value ? localStorage.setItem(TOKEN, value) : localStorage.removeItem(TOKEN); },
};

function newKey() {
  return crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

// The rpcs the contracts mark as reads (`x-frienso-read` in the edge's OpenAPI document), read
// once: safe to send again as they are.
let reads;
function readMethods() {
  reads ??= fetch("/v1/openapi.json")
    .then((response) => (response.ok ? response.json() : Promise.reject(new Error(`HTTP ${response.status}`))))
    .then((doc) => new Set(Object.values(doc.paths ?? {}).map((path) => path.post)
      .filter((op) => op?.["x-frienso-read"]).map((op) => op.operationId)))
    .catch(() => { reads = undefined; return new Set(); }); // asked again next time
  return reads;
}

/** How long a call that is safe to send again keeps trying while a service restarts. */
const RETRY_FOR_MS = 30000;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `method` ("geo.Nearby") with `body`; `mutation` attaches an idempotency key. A read (by
 * its contract) or a mutation (under its one key: a try that was applied is answered from the
 * service's replies) that meets a service restarting (503) or an edge out of reach is sent again,
 * with backoff, for up to 30 s; each new try dispatches `frienso:retrying` on `window` first.
 */
export async function call(method, body = {}, { mutation = false } = {}) {
  const [service, rpc] = method.split(".");
  const headers = { "Content-Type": "application/json" };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (mutation) headers["Idempotency-Key"] = newKey();
  const resendable = mutation || (await readMethods()).has(method);
  const until = Date.now() + RETRY_FOR_MS;
  for (let wait = 100; ; wait = Math.min(wait * 2, 1000)) {
    let response;
    try {
      response = await fetch(`/v1/${service}/${rpc}`, { method: "POST", headers, body: JSON.stringify(body) });
    } catch (error) { // the edge out of reach
      if (!resendable || Date.now() + wait > until) throw error;
    }
    if (response) {
      const json = await response.json().catch(() => ({}));
      if (response.ok) return json;
      if (response.status !== 503 || !resendable || Date.now() + wait > until) throw new APIError(response.status, json);
    }
    window.dispatchEvent(new CustomEvent("frienso:retrying", { detail: { method } }));
    await pause(wait);
  }
}

/** Uploads a photo (PUT /v1/photos); resolves with FinishUploadResponse. */
export async function uploadPhoto(file, purpose, placeId) {
  const query = new URLSearchParams({ purpose });
  if (placeId) query.set("placeId", placeId);
  const response = await fetch(`/v1/photos?${query}`, {
    method: "PUT", body: file,
    headers: { Authorization: `Bearer ${session.token}`, "Idempotency-Key": newKey() },
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, json);
  return json;
}

/** A photo as an object URL (the API needs the Authorization header an <img> cannot send). */
export async function photoURL(mediaId) {
  const response = await fetch(`/v1/photos/${encodeURIComponent(mediaId)}`, { headers: { Authorization: `Bearer ${session.token}` } });
  if (!response.ok) throw new APIError(response.status, await response.json().catch(() => ({})));
  return URL.createObjectURL(await response.blob());
}

export const name = (p) => [p?.firstName, p?.lastName].filter(Boolean).join(" ") || p?.username || `user ${p?.userId}`;

export function ago(ms) {
  const s = Math.max(0, Math.round(Number(ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

export const metres = (m) => (m >= 1000 ? `${(m / 1000).toFixed(1)} km` : `${Math.round(m)} m`);
