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

/** Calls `method` ("geo.Nearby") with `body`; `mutation` attaches an idempotency key. */
export async function call(method, body = {}, { mutation = false } = {}) {
  const [service, rpc] = method.split(".");
  const headers = { "Content-Type": "application/json" };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (mutation) headers["Idempotency-Key"] = newKey();
  const response = await fetch(`/v1/${service}/${rpc}`, { method: "POST", headers, body: JSON.stringify(body) });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) throw new APIError(response.status, json);
  return json;
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
