// What the UI's test and screenshot scripts share: `toolnexus serve` as a
// child process and a fresh headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core). Loopback only; every wait is bounded.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const TOOLNEXUS = process.env.TOOLNEXUS_BIN ?? join(ROOT, "target", "debug", "toolnexus");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];

/**
 * Starts `toolnexus serve --addr 127.0.0.1:0 …args` (from the repository
 * root), adds it to `children`, and resolves with {url, child} once its first
 * stdout line says "listening on URL" (within 30 s).
 */
export function serve(children, args) {
  return new Promise((ok, fail) => {
    const child = spawn(TOOLNEXUS, ["serve", "--addr", "127.0.0.1:0", ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let stderr = "";
    let stdout = "";
    let settled = false;
    const settle = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn(value);
    };
    const timer = setTimeout(() => settle(fail, new Error(`toolnexus serve did not start within 30 s\n${stderr}`)), 30_000);
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.stdout.on("data", (d) => {
      stdout += d;
      if (!stdout.includes("\n")) return;
      const line = stdout.split("\n")[0].trim();
      const m = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(line);
      if (m) settle(ok, { url: m[1], child });
      else settle(fail, new Error(`unexpected first line ${JSON.stringify(line)}\n${stderr}`));
    });
    child.on("error", (e) => settle(fail, e));
    child.on("exit", (code) => settle(fail, new Error(`toolnexus serve exited with ${code} before listening\n${stderr}`)));
  });
}

/** SIGTERM, then SIGKILL after 5 s; resolves once the process is gone. */
export function stop(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((ok) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 5_000);
    child.once("exit", () => {
      clearTimeout(kill);
      ok();
    });
    child.kill("SIGTERM");
  });
}

/** A fresh headless Chromium profile: {context, close()}; `args` adds switches. */
export async function launchChromium({ viewport, args = [] }) {
  // A cold first start of Chromium on a loaded 2-core machine can pass 30 s
  // (seen in CI): one more try, with a fresh profile and longer, then fail.
  let profile;
  let context;
  const stale = [];
  for (const timeout of [30_000, 60_000]) {
    // A timed-out start may still be writing its profile: leave it, clean it up last.
    if (profile) stale.push(profile);
    profile = mkdtempSync(join(tmpdir(), "toolnexus-www-chromium-"));
    try {
      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: [...FLAGS, ...args],
        viewport,
        timeout,
      });
      break;
    } catch (e) {
      if (timeout === 60_000 || e?.name !== "TimeoutError") throw e;
      console.error(`chromium did not start in ${timeout} ms; trying once more`);
    }
  }
  context.setDefaultTimeout(15_000);
  return {
    context,
    close: async () => {
      await context.close().catch(() => {});
      for (const dir of [profile, ...stale]) {
        try {
          rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
        } catch {}
      }
    },
  };
}
