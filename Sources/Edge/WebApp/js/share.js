// A share link's page: someone without an account sees one person's live location, refreshed
// every 15 s, until the link expires or is revoked. The token is the last part of the address.
import { MapView } from "./map.js";
import { ago, metres } from "./api.js";

const $ = (selector) => document.querySelector(selector);
const token = decodeURIComponent(location.pathname.split("/").filter(Boolean)[1] || "");
const map = new MapView($("#map"));
let timer;

async function refresh() {
  let reply;
  try {
    // No session is sent: the token is the credential.
    const response = await fetch("/v1/geo/ViewShareLink", { method: "POST", headers: { "Content-Type": "application/json" },
                                                            body: JSON.stringify({ token }) });
    reply = await response.json().catch(() => ({}));
    if (!response.ok) {
      $("#title").textContent = "This link has expired or was revoked";
      $("#where").textContent = "Nothing to show.";
      $("#details").textContent = "";
      clearInterval(timer);
      return;
    }
  } catch {
    $("#details").textContent = "Could not reach Frienso; trying again.";
    return;
  }
  if (reply.label) { $("#label").textContent = reply.label; $("#title").textContent = reply.label; }
  const until = new Date(Number(reply.expiresAtMs)).toLocaleString();
  if (!reply.fix) {
    $("#where").textContent = "No location shared yet.";
    $("#details").textContent = `Link valid until ${until}.`;
    return;
  }
  const lat = reply.fix.latitude, lon = reply.fix.longitude;
  $("#where").textContent = `${reply.around ? reply.around + " · " : ""}${lat.toFixed(5)}, ${lon.toFixed(5)} (±${metres(reply.fix.accuracyM)})`;
  $("#details").textContent = `Updated ${ago(Number(reply.ageMs))}. Link valid until ${until}.`;
  map.setPeople([{ id: 0, lat, lon, label: reply.label || "shared location", sub: ago(Number(reply.ageMs)), kind: "friend" }]);
  map.center = { lat, lon };
  map.draw();
}

refresh();
timer = setInterval(refresh, 15000);
