// Takes the README's screenshot of the console after a completed run, with
// the README's own command: `toolnexus serve --skills examples/skills
// --llm echo --ui www/dist` (on a free port). Build first (www/build.sh).
//
// Usage: node www/tests/screenshot.mjs [OUT.png] [WIDTH]   (default www/screenshot.png, 1200)

import { resolve } from "node:path";
import { launchChromium, ROOT, serve, stop } from "./harness.mjs";

const out = resolve(process.argv[2] ?? resolve(ROOT, "www", "screenshot.png"));
const width = Number(process.argv[3] ?? 1200);
const children = [];
let browser;
try {
  const agent = await serve(children, ["--skills", "examples/skills", "--llm", "echo", "--ui", "www/dist"]);
  browser = await launchChromium({ viewport: { width, height: 800 } });
  const page = browser.context.pages()[0] ?? (await browser.context.newPage());
  await page.goto(`${agent.url}/`, { timeout: 20_000 });
  await page.waitForSelector("body[data-ready]", { timeout: 20_000 });
  await page.click("#connect-btn");
  await page.waitForSelector('#agent-list article[data-state="ok"]');
  await page.fill("#task", "Hello! I am trying the toolnexus browser console.");
  await page.click("#run-btn");
  await page.waitForSelector('#result[data-state="completed"]', { timeout: 20_000 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: out, fullPage: width < 600 });
  console.log(`saved ${out}`);
} finally {
  await browser?.close();
  await Promise.all(children.map(stop));
}
