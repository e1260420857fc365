// `tool.stream(args, options)` and `toolkit.stream(name, args, options)`: a
// call's events as an async iterator, its result as `.result`. Plain JS over
// `execute(…, {onEvent})`, shared by every entry (ESM and CommonJS); it adds
// nothing to the .wasm.
function installStream(Tool, Toolkit) {
  function follow(start, options) {
    const listener = options && options.onEvent;
    const queue = [];
    let wake = null;
    let settled = false;
    let stopped = false;
    const ping = () => {
      if (wake) {
        wake();
        wake = null;
      }
    };
    // A listener that is not a function goes to execute as given, which reports the misuse.
    const misused = listener != null && typeof listener !== "function";
    const result = (misused ? start(options) : start({
      ...options,
      onEvent(event) {
        if (typeof listener === "function") listener(event);
        if (stopped) return;
        queue.push(event);
        ping();
      },
    })).finally(() => {
      settled = true;
      ping();
    });
    return {
      result,
      [Symbol.asyncIterator]() {
        return this;
      },
      async next() {
        while (queue.length === 0 && !settled) await new Promise((ok) => (wake = ok));
        if (queue.length > 0) return { value: queue.shift(), done: false };
        return { value: undefined, done: true };
      },
      // Leaving the loop early stops listening; the call itself goes on (abort it with a signal).
      async return() {
        queue.length = 0;
        stopped = true;
        settled = true;
        ping();
        return { value: undefined, done: true };
      },
    };
  }
  Tool.prototype.stream = function stream(args, options) {
    return follow((o) => this.execute(args, o), options);
  };
  Toolkit.prototype.stream = function stream(name, args, options) {
    return follow((o) => this.execute(name, args, o), options);
  };
}
