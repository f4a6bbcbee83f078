// Live events over the edge's WebSocket: authenticated with subprotocols (a browser cannot set
// headers), numbered; reconnects with backoff and resumes where it stopped, or refetches on reset.
import { session } from "./api.js";

function base64url(text) {
  return btoa(unescape(encodeURIComponent(text))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

export class Live {
  constructor({ onEvent, onReset, onState }) {
    this.onEvent = onEvent;
    this.onReset = onReset;
    this.onState = onState || (() => {});
    this.epoch = null;
    this.sequence = 0;
    this.delay = 500;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.retry);
    this.socket?.close(1000);
  }

  connect() {
    if (this.stopped || !session.token) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const resume = this.epoch ? `?epoch=${this.epoch}&after=${this.sequence}` : "";
    const socket = new WebSocket(`${scheme}//${location.host}/v1/events${resume}`, ["frienso.v1", `frienso.bearer.${base64url(session.token)}`]);
    this.socket = socket;
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      switch (frame.type) {
        case "hello":
          this.delay = 500;
          this.onState(true);
          if (this.epoch && this.epoch !== frame.epoch) this.onReset();
          this.epoch = frame.epoch;
          this.sequence = frame.sequence;
          break;
        case "event":
          if (frame.sequence !== this.sequence + 1) this.onReset(); // missed some: refetch
          this.sequence = frame.sequence;
          this.onEvent(frame.event, frame.data);
          break;
        case "heartbeat":
          if (frame.sequence > this.sequence) { this.sequence = frame.sequence; this.onReset(); }
          break;
        case "reset":
          this.epoch = frame.epoch;
          this.sequence = frame.sequence;
          this.onReset();
          break;
      }
    };
    socket.onclose = (event) => {
      this.onState(false);
      if (this.stopped) return;
      if (event.code === 4401) { this.onState(false, "session ended"); return; }
      this.retry = setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.delay * 2, 15000);
    };
  }
}
