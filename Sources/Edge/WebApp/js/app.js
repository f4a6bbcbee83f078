// Frienso's web app: the edge's JSON API and live events, no framework and no build step.
import { call, session, uploadPhoto, photoURL, name, ago, metres } from "./api.js";
import { Live } from "./live.js";
import { MapView } from "./map.js";
import { privacyTab } from "./privacy.js";
import { $, li, esc, button, showError } from "./ui.js";

const state = { me: null, friends: new Map(), locations: [], you: null };
const FRESH_MS = 15 * 60 * 1000;

// ---- signing in ----

$("#login-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  try {
    const reply = await call("accounts.Login", { login: form.login.value, password: form.password.value });
    session.token = reply.sessionToken;
    await start();
  } catch (error) { showError(form, error); }
});

// A forgotten password: a code by email, then a new password with it (the reply never says
// whether the account exists).
$("#reset-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  try {
    const reply = await call("accounts.RequestPasswordReset", { login: form.login.value }, { mutation: true });
    form.querySelector("[data-note]").textContent =
      `If ${form.login.value} names an account, a code is on its way to its email (it works for ${reply.expiresInMinutes} minutes).`;
  } catch (error) { showError(form, error); }
});

$("#reset-submit").addEventListener("click", async () => {
  const form = $("#reset-form");
  showError(form);
  try {
    await call("accounts.ResetPassword", { login: form.login.value, code: form.code.value, newPassword: form.newPassword.value }, { mutation: true });
    form.querySelector("[data-note]").textContent = "Your password is changed: log in with it.";
    $("#login-form").login.value = form.login.value;
    form.code.value = form.newPassword.value = "";
  } catch (error) { showError(form, error); }
});

$("#register-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  const fields = Object.fromEntries(new FormData(form));
  try {
    await call("accounts.Register", fields, { mutation: true });
    const reply = await call("accounts.Login", { login: fields.username, password: fields.password });
    session.token = reply.sessionToken;
    await start();
  } catch (error) { showError(form, error); }
});

// ---- share links ----

$("#share-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  try {
    const reply = await call("geo.CreateShareLink", { minutes: Number(form.minutes.value), label: form.label.value }, { mutation: true });
    form.querySelector("[data-note]").textContent = `Send this link: ${location.origin}${reply.path}`;
    await loadShareLinks();
  } catch (error) { showError(form, error); }
});

async function loadShareLinks() {
  const reply = await call("geo.ListShareLinks");
  const list = $("#share-links");
  list.replaceChildren();
  const now = Date.now();
  for (const link of reply.links) {
    const live = link.revokedAtMs === "0" && Number(link.expiresAtMs) > now;
    const state = live ? `until ${new Date(Number(link.expiresAtMs)).toLocaleString()}` : (link.revokedAtMs !== "0" ? "revoked" : "expired");
    const text = `<b>${esc(link.label || "link " + link.linkId)}</b> <small>${state} · ${link.views} views</small>`;
    list.append(live ? li(text, button("Revoke", async () => { await call("geo.RevokeShareLink", { linkId: link.linkId }, { mutation: true }); loadShareLinks(); }))
                     : li(text));
  }
}

$("#delete-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  if (form.confirm.value !== state.me?.username) { showError(form, "Type your username exactly to confirm."); return; }
  try {
    await call("accounts.DeleteAccount", { password: form.password.value }, { mutation: true });
    form.reset();
    stop();
    document.querySelector("#login-form [data-note]").textContent = "Your account is deleted; your data is being erased everywhere.";
  } catch (error) { showError(form, error); }
});

$("#logout").addEventListener("click", async () => {
  try { await call("accounts.Logout"); } catch {}
  stop();
});

const loadPrivacy = privacyTab(state);

// ---- tabs ----

for (const tab of document.querySelectorAll("[data-tab]")) {
  tab.addEventListener("click", () => {
    for (const other of document.querySelectorAll("[data-tab]")) other.classList.toggle("active", other === tab);
    for (const panel of document.querySelectorAll(".tab")) panel.hidden = panel.id !== `tab-${tab.dataset.tab}`;
    ({ venues: loadVenues, inbox: loadInbox, watch: loadWatch, nearby: loadNearby, checkin: loadCheckIns, privacy: loadPrivacy,
       account: loadShareLinks, map: () => map.draw() })[tab.dataset.tab]?.();
  });
}

// ---- the map and friends ----

const map = new MapView($("#map"), {
  onPick: async ({ lat, lon }) => {
    try {
      await call("geo.UpdateLocation", { latitude: lat, longitude: lon, accuracyM: 10, deviceTimeMs: String(Date.now()) });
      await loadLocations();
    } catch (error) { $("#help-status").textContent = error.message; }
  },
});
$("#zoom-in").addEventListener("click", () => map.zoom(1.5));
$("#zoom-out").addEventListener("click", () => map.zoom(1 / 1.5));
$("#recenter").addEventListener("click", () => map.recenter());

async function loadFriends() {
  const reply = await call("social.ListFriends");
  state.friends = new Map(reply.friends.map((f) => [f.user.userId, f.user]));
}

async function loadLocations() {
  const reply = await call("geo.FriendsLocations");
  state.locations = reply.friends;
  state.you = reply.you;
  render();
}

function render() {
  const now = Date.now();
  const people = [];
  if (state.you) people.push({ id: state.me.userId, lat: state.you.latitude, lon: state.you.longitude, label: "you", kind: "me" });
  const list = $("#friends");
  list.replaceChildren();
  for (const f of state.locations) {
    const who = state.friends.get(f.userId);
    const label = who ? name(who) : `user ${f.userId}`;
    const age = Number(f.ageMs) + (now - (f.seenAt ?? now));
    // Their choice of precision: approximate is a ~1 km cell, place has no coordinates at all.
    const how = f.precision === "LOCATION_PRECISION_APPROXIMATE" ? "approximately (~1 km)" : (!f.fix ? (f.around ? "" : "place only") : "");
    const sub = [f.around, how, ago(age)].filter(Boolean).join(" · ");
    if (f.fix) people.push({ id: f.userId, lat: f.fix.latitude, lon: f.fix.longitude, label, sub, kind: "friend", stale: age > FRESH_MS });
    list.append(li(`<b>${esc(label)}</b> <small>${esc(sub)}${f.distanceM ? ` · ${metres(f.distanceM)} away` : ""}${f.status ? ` · “${esc(f.status)}”` : ""}</small>`));
  }
  if (!list.children.length) list.append(li("<small>No friend shares a location with you right now.</small>"));
  map.setPeople(people);
  if (state.you && !state.placesLoaded) { state.placesLoaded = true; loadPlaces().catch(() => { state.placesLoaded = false; }); }
}

async function loadPlaces() {
  try {
    const reply = await call("geo.ListPlaces", { radiusM: 20000, limit: 1000 });
    map.setPlaces(reply.places);
  } catch (error) {
    if (error.name !== "FAILED_PRECONDITION") throw error; // no fix yet: places come with the first one
  }
}

// ---- live events ----

function onEvent(kind, data) {
  switch (kind) {
    case "geo.Location": {
      if (data.precision === "LOCATION_PRECISION_HIDDEN") { // out of sight now (a hidden zone): drop the point
        state.locations = state.locations.filter((f) => f.userId !== data.userId);
        render();
        break;
      }
      const existing = state.locations.find((f) => f.userId === data.userId);
      const entry = existing || { userId: data.userId, around: "", status: "", distanceM: 0 };
      entry.fix = data.fix;
      entry.precision = data.precision;
      if (data.around !== undefined) entry.around = data.around;
      entry.ageMs = "0";
      entry.seenAt = Date.now();
      if (data.status !== undefined) entry.status = data.status;
      if (!existing) state.locations.push(entry);
      if (data.userId === state.me?.userId) { state.you = data.fix; }
      render();
      // The event has no "Around …" label or distance: refetch them shortly (once per burst).
      clearTimeout(state.refresh);
      state.refresh = setTimeout(() => loadLocations().catch(() => {}), 1000);
      break;
    }
    case "alerts.Event":
      if (data.kind === "EVENT_KIND_HELP_NOW") banner(data);
      if (data.kind === "EVENT_KIND_HELP_NOW_RESOLVED") $("#banner").hidden = true;
      loadInbox();
      break;
    case "social.Poke":
      $("#help-status").textContent = `${name(data.from)} poked you`;
      break;
    case "geo.PlaceAlert": {
      const who = state.friends.get(data.subjectId);
      $("#help-status").textContent = `${who ? name(who) : "A friend"} ${data.arrived ? "arrived at" : "left"} ${data.label}`;
      break;
    }
    case "geo.FriendNearby":
      $("#help-status").textContent = `A friend is ${metres(data.distanceM)} away`;
      break;
  }
}

function banner(event) {
  const b = $("#banner");
  b.replaceChildren();
  const text = document.createElement("span");
  text.className = "grow";
  // The event's sentence says who, and where the alert was raised.
  text.textContent = event.text || `HELP NOW: ${event.from ? name(event.from) : "someone in your circle"} needs help.`;
  b.dataset.from = event.from?.userId ?? "";
  b.append(text, button("Show", () => { document.querySelector("[data-tab=inbox]").click(); }), button("Dismiss", () => { b.hidden = true; }));
  b.hidden = false;
}

const live = new Live({
  onEvent,
  onReset: () => { loadLocations().catch(() => {}); loadInbox().catch(() => {}); },
  onState: (on) => { $("#live").classList.toggle("on", on); },
});

// ---- venues ----

async function loadVenues() {
  const reply = await call("geo.ListVenues");
  const list = $("#venues");
  list.replaceChildren();
  for (const v of reply.venues) {
    list.append(li(`<b>${esc(v.venue.name)}</b> <small>${v.few ? `fewer than ${reply.minPeople} people` : `${v.people} ${v.people === 1 ? "person" : "people"}`}, ${v.friends} ${v.friends === 1 ? "friend" : "friends"} now</small>`,
      button("Photos", () => loadVenuePhotos(v.venue))));
  }
  if (!reply.venues.length) list.append(li("<small>No venues known yet.</small>"));
}

async function loadVenuePhotos(venue) {
  const box = $("#venue-photos");
  box.replaceChildren();
  const reply = await call("media.ListPhotos", { placeId: venue.placeId, limit: 24 });
  for (const item of reply.items) {
    const img = document.createElement("img");
    img.alt = `${venue.name} photo`;
    img.src = await photoURL(item.mediaId);
    box.append(img);
  }
  if (!reply.items.length) box.textContent = `No photos of ${venue.name} yet.`;
}

// ---- inbox ----

async function loadInbox() {
  const reply = await call("alerts.ListInbox");
  const list = $("#inbox");
  list.replaceChildren();
  $("#inbox-count").textContent = reply.items.length || "";
  const labels = { REQUEST_KIND_WATCH: "watch me", REQUEST_KIND_HELP_NOW: "helpNow", REQUEST_KIND_CORE_FRIEND: "core circle" };
  for (const item of reply.items) {
    const respond = (action) => async () => {
      await call("alerts.RespondInbox", { kind: item.kind, requestId: item.requestId, action }, { mutation: true });
      await loadInbox();
      await loadLocations();
    };
    list.append(li(`<b>${esc(labels[item.kind] || item.kind)}</b> from ${esc(name(item.from))} <small>${esc(item.text)}</small>`,
      button("Accept", respond("INBOX_ACTION_ACCEPT"), "primary"), button("Reject", respond("INBOX_ACTION_REJECT")),
      button("Dismiss", respond("INBOX_ACTION_DISMISS"))));
  }
  if (!reply.items.length) list.append(li("<small>Nothing waiting for you.</small>"));
}

// ---- watch ----

$("#watch-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  try {
    await call("alerts.StartWatch", { note: form.note.value, durationSeconds: Number(form.minutes.value) * 60 }, { mutation: true });
    await loadWatch();
  } catch (error) { showError(form, error); }
});

async function loadWatch() {
  const reply = await call("alerts.GetWatch");
  const box = $("#watch-status");
  const mine = reply.mine && reply.mine.state === "WATCH_STATE_ACTIVE" ? reply.mine : null;
  const lines = [];
  if (mine) {
    lines.push(`<b>Your walk</b> until ${new Date(Number(mine.endsAtMs)).toLocaleTimeString()}`);
    for (const w of mine.watchers) lines.push(`${esc(name(w.person))}: ${esc((w.answer || "").replace("ANSWER_", "").toLowerCase() || "asked")}`);
  } else {
    lines.push("You have no active walk.");
  }
  for (const s of reply.watching) lines.push(`You are watching ${esc(name(s.initiator))} until ${new Date(Number(s.endsAtMs)).toLocaleTimeString()}`);
  box.innerHTML = lines.map((l) => `<p>${l}</p>`).join("");
  if (mine) box.append(button("I am home (end)", async () => { await call("alerts.EndWatch", {}, { mutation: true }); await loadWatch(); }));
}

// ---- nearby ----

async function loadNearby() {
  const list = $("#nearby");
  list.replaceChildren();
  try {
    const reply = await call("geo.Nearby", { radiusM: 1500, limit: 50 });
    for (const u of reply.users) list.append(li(`user ${esc(u.userId)} <small>${metres(u.distanceM)} away</small>`));
    if (!reply.users.length) list.append(li("<small>Nobody findable near you.</small>"));
  } catch (error) { list.append(li(`<small>${esc(error.message)}</small>`)); }
}
$("#nearby-refresh").addEventListener("click", loadNearby);

// ---- check-ins ----

$("#checkin-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  showError(form);
  try {
    let mediaId = "";
    const file = form.photo.files[0];
    if (file) mediaId = (await uploadPhoto(file, "check_in")).item.mediaId;
    await call("geo.CheckIn", { placeName: form.place.value, mediaId }, { mutation: true });
    form.reset();
    await loadCheckIns();
  } catch (error) { showError(form, error); }
});

async function loadCheckIns() {
  const reply = await call("geo.ListCheckIns", { feed: true });
  const list = $("#checkins");
  list.replaceChildren();
  for (const c of reply.checkIns) {
    const who = c.userId === state.me.userId ? "you" : name(state.friends.get(c.userId) || { userId: c.userId });
    list.append(li(`<b>${esc(who)}</b> at ${esc(c.placeName)} <small>${ago(Date.now() - Number(c.createdAtMs))}</small>`));
  }
}

// ---- helpNow ----

// Where the phone is as the alert goes: asked for when the button is pressed, so that it has
// usually arrived by the confirmation; the alert never waits for it (without it, the alert
// carries the last location the service has).
let helpFix = null;
$("#help").addEventListener("click", () => {
  $("#help-confirm").hidden = false;
  helpFix = null;
  navigator.geolocation?.getCurrentPosition(
    (position) => {
      helpFix = { latitude: position.coords.latitude, longitude: position.coords.longitude,
                  accuracyM: Math.min(position.coords.accuracy ?? 0, 100000), deviceTimeMs: String(Math.round(position.timestamp || Date.now())) };
    },
    () => {}, { enableHighAccuracy: true, maximumAge: 30000, timeout: 10000 });
});
$("#help-no").addEventListener("click", () => { $("#help-confirm").hidden = true; });
$("#help-yes").addEventListener("click", async () => {
  $("#help-confirm").hidden = true;
  $("#help-status").textContent = "Sending your alert…";
  try {
    const request = { message: $("#help-message").value };
    if (helpFix) request.fix = helpFix;
    const reply = await call("alerts.RaiseHelpNow", request, { mutation: true });
    $("#help-status").textContent = reply.nobodyNotified
      ? "Nobody is in your circle: call the emergency number now."
      : `Your circle was alerted (${reply.notified}). Call the emergency number if you are in danger.`;
  } catch (error) { $("#help-status").textContent = error.message; }
});

// A call sent again (api.js) while a service restarts: said where someone waits for it.
window.addEventListener("frienso:retrying", (event) => {
  if (event.detail.method === "alerts.RaiseHelpNow") $("#help-status").textContent = "Still sending your alert: the service is restarting…";
});

// ---- start and stop ----

async function start() {
  try {
    const who = await call("accounts.WhoAmI");
    state.me = who.account.profile;
  } catch (error) {
    if (error.status === 401) { stop(); return; }
    throw error;
  }
  $("#signin").hidden = true;
  $("#home").hidden = false;
  window.scrollTo(0, 0); // the sign-in forms may have been scrolled: home starts at its top
  $("#logout").hidden = false;
  $("#me").textContent = name(state.me);
  live.start();
  await loadFriends();
  await loadLocations();
  await loadInbox();
}

function stop() {
  live.stop();
  session.token = null;
  // No password stays in a form once the session is over (a shared computer).
  for (const input of document.querySelectorAll("input[type=password]")) input.value = "";
  state.me = null;
  state.placesLoaded = false;
  $("#home").hidden = true;
  $("#logout").hidden = true;
  $("#signin").hidden = false;
  $("#me").textContent = "";
  $("#banner").hidden = true;
}

if (session.token) start(); else stop();
setInterval(() => { if (state.me) render(); }, 15000); // freshness labels age
