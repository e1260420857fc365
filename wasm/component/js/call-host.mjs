// The host side of `toolnexus:a2a/call-host` for Node (jco transpile --map
// toolnexus:a2a/call-host=../call-host.mjs): a `call-listener` is a plain JS
// object with callbacks, and its abort signal a wasi pollable.
import { monotonicClock } from '@bytecodealliance/preview2-shim/clocks';

/** A listener of `client.callLive`: `onTools(tools)`, `onEvent(event)` as
 * they happen, and the call aborted (the task canceled) after `abortAfterMs`. */
export class CallListener {
  constructor({ onTools = () => {}, onEvent = () => {}, abortAfterMs = 86_400_000 } = {}) {
    this.tools = onTools;
    this.event = onEvent;
    this.abortAfterNs = BigInt(abortAfterMs) * 1_000_000n;
  }
  onTools(tools) { this.tools(tools); }
  onEvent(event) { this.event(event); }
  aborted() { return monotonicClock.subscribeDuration(this.abortAfterNs); }
}
