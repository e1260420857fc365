// A toolnexus A2A agent on Cloudflare Workers (or workerd): the example
// skills (examples/skills), tasks in Durable Objects (toolnexus-wasm/durable).
//
// Who answers: TOOLNEXUS_LLM = "echo" (default; offline), "openai" or
// "anthropic", with TOOLNEXUS_MODEL, TOOLNEXUS_LLM_BASE_URL (optional) and
// the secret TOOLNEXUS_API_KEY (`.dev.vars` locally, `wrangler secret put`
// deployed): the same names as the agent component's environment.

import { createA2AHandler, createClient } from "toolnexus-wasm";
import { parseSkillMd } from "toolnexus-wasm/skills";
import { A2ATaskStore, durableObjectStore } from "toolnexus-wasm/durable";
import helloWorld from "../../../examples/skills/hello-world/SKILL.md";
import summarize from "../../../examples/skills/summarize/SKILL.md";

export { A2ATaskStore };

const skills = [parseSkillMd(helloWorld), parseSkillMd(summarize)];
const BASE_URLS = { openai: "https://api.openai.com/v1", anthropic: "https://api.anthropic.com" };

/** "echo", or a model client from the bindings. */
function answerer(env) {
  const style = env.TOOLNEXUS_LLM || "echo";
  if (style === "echo") return "echo";
  if (!(style in BASE_URLS)) throw new Error(`TOOLNEXUS_LLM must be echo, openai or anthropic, not ${JSON.stringify(style)}`);
  if (!env.TOOLNEXUS_MODEL) throw new Error("TOOLNEXUS_MODEL is required with TOOLNEXUS_LLM=openai or anthropic");
  return createClient({
    baseUrl: env.TOOLNEXUS_LLM_BASE_URL || BASE_URLS[style],
    style,
    model: env.TOOLNEXUS_MODEL,
    apiKey: env.TOOLNEXUS_API_KEY,
  });
}

let handler;
export default {
  fetch(request, env, ctx) {
    handler ??= createA2AHandler({
      skills,
      client: answerer(env),
      a2a: { name: env.TOOLNEXUS_AGENT_NAME || "toolnexus-worker", description: "The example skills, served from a worker" },
      store: durableObjectStore(env.TASKS),
    });
    return handler(request, env, ctx);
  },
};
