// The Privacy tab: how precisely each friend sees you, privacy zones, and place alerts.
import { call, name } from "./api.js";
import { $, li, esc, button, showError } from "./ui.js";

const LEVELS = [["LOCATION_PRECISION_EXACT", "exact"], ["LOCATION_PRECISION_APPROXIMATE", "approximate (~1 km)"],
                ["LOCATION_PRECISION_PLACE", "the place only"], ["LOCATION_PRECISION_HIDDEN", "hidden"]];

function select(options, value, onChange) {
  const s = document.createElement("select");
  for (const [v, label] of options) s.append(new Option(label, v, false, v === value));
  s.addEventListener("change", () => onChange(s.value));
  return s;
}

/** Wires the tab's forms; `state` is the app's (friends, where you are). Returns its loader. */
export function privacyTab(state) {
  const friendName = (id) => { const f = state.friends.get(id); return f ? name(f) : `user ${id}`; };

  async function loadPrecision() {
    const reply = await call("geo.GetPrecision");
    const own = new Map(reply.settings.map((s) => [s.userId, s.precision]));
    $("#precision-default").replaceChildren(select(LEVELS, reply.defaultPrecision, async (v) => {
      await call("geo.SetPrecision", { userId: "0", precision: v }, { mutation: true });
    }));
    const list = $("#precision-friends");
    list.replaceChildren();
    for (const id of state.friends.keys()) {
      const options = [["LOCATION_PRECISION_UNSPECIFIED", "as the default"], ...LEVELS];
      list.append(li(`<b>${esc(friendName(id))}</b>`, select(options, own.get(id) ?? "LOCATION_PRECISION_UNSPECIFIED", async (v) => {
        await call("geo.SetPrecision", { userId: id, precision: v }, { mutation: true });
      })));
    }
  }

  async function loadZones() {
    const reply = await call("geo.ListZones");
    const list = $("#zones");
    list.replaceChildren();
    for (const z of reply.zones) {
      const privacy = { ZONE_PRIVACY_LABEL: "friends see its name", ZONE_PRIVACY_HIDDEN: "friends see nothing", ZONE_PRIVACY_OFF: "not private" }[z.privacy] ?? "";
      const sub = [`${Math.round(z.radiusM)} m`, privacy, z.keepHistory ? "history kept" : "", z.inside ? "you are inside" : ""].filter(Boolean).join(" · ");
      list.append(li(`<b>${esc(z.label)}</b> <small>${esc(sub)}</small>`, button("Delete", async () => {
        await call("geo.DeleteZone", { zoneId: z.zoneId }, { mutation: true });
        await loadZones();
      })));
    }
    if (!reply.zones.length) list.append(li("<small>No zones yet.</small>"));
  }

  async function loadPlaceAlerts() {
    const reply = await call("geo.ListPlaceAlerts");
    const allowed = new Set(reply.allowed);
    const who = $("#place-alert-allowed");
    who.replaceChildren();
    for (const id of state.friends.keys()) {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = allowed.has(id);
      box.dataset.userId = id;
      box.addEventListener("change", async () => {
        await call("geo.AllowPlaceAlerts", { userId: id, allowed: box.checked }, { mutation: true });
        await loadPlaceAlerts();
      });
      who.append(li(`<b>${esc(friendName(id))}</b> <small>may be told when you arrive or leave</small>`, box));
    }
    const list = $("#place-alerts");
    list.replaceChildren();
    const directions = (a) => [a.onArrive ? "arrives" : "", a.onLeave ? "leaves" : ""].filter(Boolean).join(" or ");
    for (const a of reply.mine) {
      list.append(li(`You are told when <b>${esc(friendName(a.subjectId))}</b> ${directions(a)} <b>${esc(a.label)}</b>`,
        button("Delete", async () => { await call("geo.DeletePlaceAlert", { alertId: a.alertId }, { mutation: true }); await loadPlaceAlerts(); })));
    }
    for (const a of reply.aboutMe) {
      list.append(li(`<b>${esc(friendName(a.viewerId))}</b> is told when you ${directions(a).replace("arrives", "arrive").replace("leaves", "leave")} <b>${esc(a.label)}</b>`,
        button("Stop it", async () => { await call("geo.DeletePlaceAlert", { alertId: a.alertId }, { mutation: true }); await loadPlaceAlerts(); })));
    }
    const subject = $("#place-alert-form").subject;
    const chosen = subject.value;
    subject.replaceChildren(new Option("a friend…", ""));
    for (const id of state.friends.keys()) subject.append(new Option(friendName(id), id, false, id === chosen));
  }

  // The places one may watch for a friend: their zones (names only), then campus places near you.
  $("#place-alert-form").subject.addEventListener("change", async (e) => {
    const form = e.target.form;
    showError(form);
    form.target.replaceChildren();
    if (!e.target.value) return;
    try {
      const zones = await call("geo.ListPlaceAlertTargets", { subjectId: e.target.value });
      for (const z of zones.zones) form.target.append(new Option(`${z.label} (their place)`, `zone:${z.zoneId}`));
      const places = await call("geo.ListPlaces", { radiusM: 20000, limit: 200 }).catch(() => ({ places: [] }));
      for (const p of places.places) form.target.append(new Option(p.name, `place:${p.placeId}`));
    } catch (error) { showError(form, error); }
  });

  $("#place-alert-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    showError(form);
    const [kind, id] = form.target.value.split(":");
    try {
      await call("geo.CreatePlaceAlert", { subjectId: form.subject.value, [kind === "zone" ? "zoneId" : "placeId"]: id,
                                          onArrive: form.arrive.checked, onLeave: form.leave.checked }, { mutation: true });
      await loadPlaceAlerts();
    } catch (error) { showError(form, error); }
  });

  $("#zone-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const form = e.target;
    showError(form);
    if (!state.you) { showError(form, "Share a location first: a zone is made where you are."); return; }
    try {
      await call("geo.SetZone", { zone: { label: form.label.value, latitude: state.you.latitude, longitude: state.you.longitude,
                                          radiusM: Number(form.radius.value), privacy: form.privacy.value, keepHistory: form.keepHistory.checked } },
                 { mutation: true });
      form.label.value = "";
      await loadZones();
    } catch (error) { showError(form, error); }
  });

  return async () => { await Promise.all([loadPrecision(), loadZones(), loadPlaceAlerts()]); };
}
