// Small helpers the screens share: no framework.
import { APIError } from "./api.js";

export const $ = (selector) => document.querySelector(selector);

/** A list row: `html` (escape what people typed with `esc`), then its controls. */
export function li(html, ...controls) {
  const item = document.createElement("li");
  const text = document.createElement("div");
  text.className = "grow";
  text.innerHTML = html;
  item.append(text, ...controls);
  return item;
}

export const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

export function button(label, onClick, cls = "") {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (cls) b.className = cls;
  b.addEventListener("click", onClick);
  return b;
}

export function showError(form, error) {
  form.querySelector("[data-error]").textContent = error ? (error instanceof APIError ? `${error.message} (${error.name})` : String(error)) : "";
}
