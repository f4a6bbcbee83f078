// The map, drawn as SVG from coordinates (no tiles): a local flat projection around a centre,
// north up; places' outlines, you and the friends who share with you, with labels.
const SVG = "http://www.w3.org/2000/svg";
const M_PER_DEG = 111320;

function el(name, attributes = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

export class MapView {
  constructor(svg, { onPick } = {}) {
    this.svg = svg;
    this.onPick = onPick;
    this.center = null;           // {lat, lon}
    this.scale = 0.6;             // pixels per metre
    this.places = [];
    this.people = [];             // {id, lat, lon, label, sub, kind: "me" | "friend", stale}
    this.layers = { places: el("g"), people: el("g") };
    svg.append(this.layers.places, this.layers.people);
    this.listen();
    new ResizeObserver(() => this.draw()).observe(svg);
  }

  project(lat, lon) {
    const w = this.svg.clientWidth, h = this.svg.clientHeight;
    const k = Math.cos((this.center.lat * Math.PI) / 180);
    return [w / 2 + (lon - this.center.lon) * M_PER_DEG * k * this.scale, h / 2 - (lat - this.center.lat) * M_PER_DEG * this.scale];
  }

  unproject(x, y) {
    const w = this.svg.clientWidth, h = this.svg.clientHeight;
    const k = Math.cos((this.center.lat * Math.PI) / 180);
    return { lat: this.center.lat - (y - h / 2) / (M_PER_DEG * this.scale), lon: this.center.lon + (x - w / 2) / (M_PER_DEG * k * this.scale) };
  }

  setPlaces(places) { this.places = places; this.draw(); }

  setPeople(people) {
    this.people = people;
    if (!this.center) {
      const me = people.find((p) => p.kind === "me") || people[0];
      if (me) this.center = { lat: me.lat, lon: me.lon };
    }
    this.draw();
  }

  recenter() {
    const me = this.people.find((p) => p.kind === "me");
    if (me) { this.center = { lat: me.lat, lon: me.lon }; this.draw(); }
  }

  zoom(factor, x, y) {
    if (!this.center) return;
    const before = x === undefined ? null : this.unproject(x, y);
    this.scale = Math.min(20, Math.max(0.01, this.scale * factor));
    if (before) {
      const after = this.unproject(x, y);
      this.center = { lat: this.center.lat + before.lat - after.lat, lon: this.center.lon + before.lon - after.lon };
    }
    this.draw();
  }

  listen() {
    const pointers = new Map();
    let last = null, pinch = null;
    this.svg.addEventListener("pointerdown", (e) => {
      this.svg.setPointerCapture(e.pointerId);
      pointers.set(e.pointerId, [e.offsetX, e.offsetY]);
      last = [e.offsetX, e.offsetY];
      this.svg.classList.add("dragging");
    });
    this.svg.addEventListener("pointermove", (e) => {
      if (!pointers.has(e.pointerId) || !this.center) return;
      pointers.set(e.pointerId, [e.offsetX, e.offsetY]);
      if (pointers.size === 2) {
        const [a, b] = [...pointers.values()];
        const d = Math.hypot(a[0] - b[0], a[1] - b[1]);
        if (pinch) this.zoom(d / pinch, (a[0] + b[0]) / 2, (a[1] + b[1]) / 2);
        pinch = d;
        return;
      }
      const from = this.unproject(...last), to = this.unproject(e.offsetX, e.offsetY);
      this.center = { lat: this.center.lat + from.lat - to.lat, lon: this.center.lon + from.lon - to.lon };
      last = [e.offsetX, e.offsetY];
      this.draw();
    });
    const end = (e) => { pointers.delete(e.pointerId); pinch = null; if (!pointers.size) this.svg.classList.remove("dragging"); };
    this.svg.addEventListener("pointerup", end);
    this.svg.addEventListener("pointercancel", end);
    this.svg.addEventListener("wheel", (e) => { e.preventDefault(); this.zoom(e.deltaY < 0 ? 1.25 : 0.8, e.offsetX, e.offsetY); }, { passive: false });
    this.svg.addEventListener("dblclick", (e) => { if (this.center && this.onPick) this.onPick(this.unproject(e.offsetX, e.offsetY)); });
  }

  draw() {
    if (!this.center || !this.svg.clientWidth) return;
    this.layers.places.replaceChildren();
    this.layers.people.replaceChildren();
    const kinds = { PLACE_KIND_CAMPUS: "campus", PLACE_KIND_BUILDING: "building", PLACE_KIND_VENUE: "venue" };
    const ordered = [...this.places].sort((a, b) => (a.kind === "PLACE_KIND_CAMPUS" ? -1 : 0) - (b.kind === "PLACE_KIND_CAMPUS" ? -1 : 0));
    for (const place of ordered) {
      const kind = kinds[place.kind] || "building";
      if (place.polygonLat?.length >= 3) {
        const points = place.polygonLat.map((lat, i) => this.project(lat, place.polygonLon[i]).join(",")).join(" ");
        this.layers.places.append(el("polygon", { points, class: kind, "data-place": place.name }));
      } else {
        const [x, y] = this.project(place.latitude, place.longitude);
        this.layers.places.append(el("circle", { cx: x, cy: y, r: Math.max(4, (place.radiusM || 50) * this.scale), class: kind, "data-place": place.name }));
      }
      if (kind !== "campus") {
        const [x, y] = this.project(place.latitude, place.longitude);
        this.layers.places.append(el("text", { x, y, "text-anchor": "middle", class: "place-label" }, place.name));
      }
    }
    for (const person of this.people) {
      const [x, y] = this.project(person.lat, person.lon);
      const group = el("g", {
        class: `person ${person.kind}${person.stale ? " stale" : ""}`, transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`,
        "data-user-id": person.id, "data-lat": person.lat, "data-lon": person.lon,
      });
      group.append(el("circle", { r: person.kind === "me" ? 8 : 7 }), el("text", { x: 11, y: 4 }, person.label));
      if (person.sub) group.append(el("text", { x: 11, y: 17, class: "sub" }, person.sub));
      this.layers.people.append(group);
    }
  }
}
