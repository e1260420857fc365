
// ---------------------------------------------------------------------------
// The server half (full entry "toolnexus-wasm" only).

/** A skill as data. */
export interface Skill {
  name: string;
  description?: string;
  /** The instructions the model loads with the `skill` tool. */
  content?: string;
}

/**
 * A skill as data. A SKILL.md text is turned into one with `parseSkillMd`
 * from "toolnexus-wasm/skills" (the YAML parser has its own .wasm); passing
 * the text itself throws an Error of kind "misuse".
 */
export type SkillLike = Skill;

export interface ToolkitOptions {
  /** Skills: offered to a model through the `skill` tool. */
  skills?: SkillLike[];
}

/** Who runs the agent. */
export interface Provider {
  organization: string;
  url: string;
}

/** The agent's identity on its card. */
export interface A2AConfig {
  /** Default "toolnexus-agent". */
  name?: string;
  /** Default "". */
  description?: string;
  /** Default "0.1.0". */
  version?: string;
  provider?: Provider;
  /** Advertise only these skills (unknown names are ignored). */
  skills?: string[];
}

/** The served Agent Card (readable by A2A 0.3 and 1.0 clients). */
export interface AgentCard {
  name: string;
  description: string;
  version: string;
  protocolVersion: string;
  url: string;
  preferredTransport: "JSONRPC";
  supportedInterfaces: { url: string; protocolBinding: "JSONRPC"; protocolVersion: string }[];
  capabilities: { streaming: boolean; pushNotifications: boolean };
  defaultInputModes: string[];
  defaultOutputModes: string[];
  provider?: Provider;
  skills: { id: string; name: string; description: string; tags: string[] }[];
}

/** Builds the card `createA2AHandler` serves at `url` (its JSON-RPC endpoint). Pure. */
export declare function buildAgentCard(
  cfg: A2AConfig | null | undefined,
  skills: SkillLike[],
  url: string,
): AgentCard;

/** `createClient` options: an OpenAI- or Anthropic-style model endpoint. */
export interface ClientOptions {
  /** E.g. `https://api.openai.com/v1` or `https://api.anthropic.com`. */
  baseUrl: string;
  style: "openai" | "anthropic";
  model: string;
  apiKey?: string;
  /** Extra headers; one named like a default header replaces it. */
  headers?: Record<string, string>;
  systemPrompt?: string;
  /** Model calls per run. Default 10. */
  maxTurns?: number;
  /** Sent to Anthropic-style endpoints. Default 4096. */
  maxTokens?: number;
  /** Per model request, in ms. Default 120000. */
  timeout?: number;
}

/** One tool call of a run. */
export interface ToolCallRecord {
  name: string;
  arguments: JsonValue;
  output: string;
  isError: boolean;
}

/** The outcome of `run`. */
export interface RunResult {
  /** The last reply's text. */
  text: string;
  toolCalls: ToolCallRecord[];
  toolCallCount: number;
  /** Model calls made. */
  turns: number;
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
  model: string;
}

/** An LLM client. */
export interface Client {
  /** The tool loop: call the model, run its tool calls, feed the results back. Rejects with a `ToolnexusError`. */
  run(prompt: string, options?: { toolkit?: Toolkit }): Promise<RunResult>;
  free(): void;
}

export declare function createClient(options: ClientOptions): Client;

// TextPart and A2AMessage: see the client half above.

/**
 * A task as a store sees it: its A2A shape in its own dialect (0.3 below;
 * 1.0 spells states `TASK_STATE_…`), plus what only the store keeps.
 */
export interface A2ATask {
  id: string;
  contextId: string;
  kind: "task";
  status: { state: TaskStateName; message?: A2AMessage; timestamp?: string };
  artifacts?: { artifactId: string; parts: TextPart[] }[];
  history?: A2AMessage[];
  /** The caller who made it (with `authenticate`/`auth`); never sent to a caller. */
  owner?: string;
  /** One more with every save; absent or 0: never stored. */
  version?: number;
  /** While it runs: the isolate fulfilling it and until when (Unix ms) its claim holds. */
  lease?: { holder: string; until: number };
}

/** Which tasks ListTasks asks a store for. */
export interface TaskQuery {
  contextId?: string;
  status?: TaskStateName;
  /** RFC 3339; inclusive. */
  statusTimestampAfter?: string;
  /** Only this caller's tasks (their `owner`). */
  owner?: string;
}

/** One page: after the task `after` (its status time in Unix ms and id) in the order newest status first, ties the greater id first. */
export interface TaskPageQuery extends TaskQuery {
  after?: { timestamp: number; id: string };
  limit: number;
}

/**
 * Where tasks live (KV, Durable Objects, …); `toolnexus-wasm/durable` has
 * one on Durable Objects. Every method may return a promise. The handler
 * decides what a version, a lease or a cancel mean; a store keeps what it is
 * given and refuses stale saves.
 */
export interface TaskStore {
  get(id: string): Promise<A2ATask | null | undefined> | A2ATask | null | undefined;
  /**
   * Stores `task` durably, as a compare-and-swap on `task.version`: it
   * replaces the stored task only if that one is `task.version - 1` (absent
   * for 1), and is then stored as stored version + 1; a `version` of 0 or
   * absent always goes through. Otherwise nothing changes and it resolves
   * `false` (or rejects with an error whose `conflict` is `true`): the
   * handler reads the task again and decides again, so a cancel stored by
   * another isolate is never overwritten by a late `completed`.
   */
  save(task: A2ATask): Promise<void | boolean> | void | boolean;
  /**
   * One page of the tasks passing the query, newest status first (ties: the
   * greater id first), and how many pass in all. Preferred to `list`.
   */
  listPage?(query: TaskPageQuery): Promise<{ tasks: A2ATask[]; totalSize: number }> | { tasks: A2ATask[]; totalSize: number };
  /**
   * Every stored task passing the query (returning more is fine: the handler
   * filters, orders and pages). Without `listPage` and `list` ListTasks is -32004.
   */
  list?(query: TaskQuery): Promise<A2ATask[]> | A2ATask[];
  /** Tasks still `submitted`/`working` whose `lease.until` is before `now`: the handler fails them as interrupted. */
  expired?(query: { now: number; limit: number }): Promise<A2ATask[]> | A2ATask[];
  /**
   * Deletes at most `limit` terminal tasks whose status time is before
   * `before` (Unix ms), with their push configs; how many went. Called by
   * the handler's periodic sweep for `retentionMs`; without it nothing is
   * deleted.
   */
  deleteFinished?(query: { before: number; limit: number }): Promise<number> | number;
  /**
   * Called once with a function to call when a task changed elsewhere
   * (another isolate saved it): streams and long-polls on it wake at once
   * instead of at the next `storePollMs`.
   */
  watch?(changed: (taskId: string, version?: number) => void): void;
  /**
   * Push notifications (the handler's `push` option): the configs last given to `savePushConfigs` for this task, or null. They hold the
   * webhooks' credentials: keep them as private as the tasks.
   */
  getPushConfigs?(taskId: string): Promise<JsonValue[] | null | undefined> | JsonValue[] | null | undefined;
  savePushConfigs?(taskId: string, configs: JsonValue[]): Promise<void> | void;
}

/** A task reached a terminal state. */
export interface TaskEvent {
  id: string;
  skill?: string;
  /** The task's text. */
  task: string;
  /** The answer (completed) or the error text (failed). */
  result?: string;
  state: TaskStateName;
  /** The W3C trace id (32 hex digits) of the trace the task belongs to, when it has one. */
  traceId?: string;
}

/** What a custom fulfiller is asked to do. */
export interface FulfilRequest {
  taskId: string;
  contextId: string;
  /** The message's text parts joined by "\n". */
  text: string;
  /** The skill named in the message's `metadata.skill`, if any. */
  skill?: string;
  /**
   * The conversation before this message, oldest first: the earlier turns of
   * the context (when the caller named one) and, when the message answers a
   * question, the task's turns up to that question. At most 40 messages.
   */
  history: ConversationTurn[];
  /**
   * The task's W3C `traceparent` (its span), when the request that made or
   * continued it carried one: pass it on with the fulfiller's own requests.
   */
  traceparent?: string;
}

/** One earlier message of a conversation. */
export interface ConversationTurn {
  role: "user" | "agent";
  text: string;
}

/**
 * What a custom fulfiller resolves to: the answer text (completes the task),
 * or a question that stops the task until the caller answers on it
 * (`input-required`; `auth-required` for credentials). The answer calls the
 * fulfiller again on the same task, the question in `request.history`.
 */
export type FulfilResult = string | { inputRequired: string } | { authRequired: string };

/**
 * Reports a task's progress: each call updates the stored task and reaches
 * every stream following it (`SendStreamingMessage`, `SubscribeToTask`) at
 * once. Calls after the task has settled are ignored.
 */
export interface ProgressEmitter {
  /** A `working` status update with an agent message saying `text`. */
  status(text: string): void;
  /**
   * A chunk of the answer artifact. The stored answer is the chunks in order
   * (one artifact); a non-empty returned text is appended as the last chunk.
   */
  artifact(text: string, options?: { lastChunk?: boolean }): void;
}

/**
 * A custom fulfiller: resolves to the answer text (completes the task) or a
 * question ({@link FulfilResult}); a throw or rejection fails it with the
 * error's message.
 */
export type Fulfil = (request: FulfilRequest, emit: ProgressEmitter) => FulfilResult | Promise<FulfilResult>;

/** `createA2AHandler` options. */
export interface A2AHandlerOptions {
  /** Advertised on the card and offered to the model through the `skill` tool. */
  skills?: SkillLike[];
  /**
   * Who answers tasks: an LLM client (tool calls are reported as working
   * statuses naming the tool), "echo" (answers with the task's text), or a
   * function of your own.
   */
  client: Client | "echo" | Fulfil;
  /** The card identity; `false` or `null` serves no A2A profile (every route 404). */
  a2a?: A2AConfig | false | null;
  /** Default "memory" (per isolate in a worker). */
  store?: "memory" | TaskStore;
  /** Called once per task on its terminal state. */
  onTask?(event: TaskEvent): void | Promise<void>;
  /**
   * Gets the spans the handler records, for your exporter (the `.wasm` has
   * none): each request served (`a2a.server {method}`), each turn of a task
   * (`a2a.task`), and with an LLM `client` each model call (`chat {model}`),
   * tool call (`execute_tool {tool}`, a skill, a host tool or an agent) and
   * agent request (`a2a.client {method}`), in the trace of the request's W3C
   * `traceparent` (or a new one). Replaces the `toolkit`'s own `onSpan` in
   * the handler's runs.
   */
  onSpan?(span: Span): void;
  /** More tools for the model (agents, host tools). */
  toolkit?: Toolkit;
  /** The JSON-RPC URL the card advertises. Default: each card request's own origin + "/". */
  url?: string;
  /** `Access-Control-Allow-Origin`; default "*"; `false` or `null` sends no CORS headers. */
  cors?: string | false | null;
  /**
   * How long an event stream may stay idle before a `: ping` comment keeps it
   * open (proxies cut silent streams). Default 15000; `0`, `false` or `null`: none.
   */
  heartbeatMs?: number | false | null;
  /**
   * Crash recovery for a JS `store`: a stored task still `submitted` or
   * `working` that no instance here runs, with no status change for this
   * long, is failed ("the server stopped before this task finished") when it
   * is read: the isolate that ran it is gone. Pick it above your longest
   * silent stretch. Default 600000 (10 min) with a JS store, none with the
   * memory store; `0`, `false` or `null`: never.
   */
  interruptedAfterMs?: number | false | null;
  /**
   * With a JS `store`: a running task's lease (its isolate renews it every
   * third of it); a task still `submitted`/`working` past it was abandoned
   * and is failed as interrupted by whoever reads it (and by the handler's
   * periodic sweep, `store.expired`). Default 30000 with a JS store; `0`,
   * `false` or `null`: no leases.
   */
  leaseMs?: number | false | null;
  /**
   * With a JS `store`: how often a stream or long-poll on a task running
   * in another isolate reads it again when `store.watch` told of no change.
   * Default 2000 with a JS store; `0`, `false` or `null`: only when told.
   */
  storePollMs?: number | false | null;
  /**
   * With a JS `store` that has `deleteFinished`: finished tasks whose status
   * is older than this are deleted by the handler's periodic sweep (once a
   * lease period per isolate). Default 7 days (604800000, as `toolnexus
   * serve`); `0`, `false` or `null`: kept.
   */
  retentionMs?: number | false | null;
  /**
   * Push notifications to webhooks. `true`: public webhooks only;
   * `{allowPrivateWebhooks: true}`: loopback and private addresses too.
   * Absent: the card says `pushNotifications: false` and the config methods
   * answer -32003.
   */
  push?: boolean | { allowPrivateWebhooks?: boolean };
  /**
   * Your own verifier, asked for every request but the public card and CORS
   * preflights. Return a {@link Principal} to accept the caller; a
   * `Response` to refuse the request with exactly that response (the
   * handler adds its CORS headers); `null` or `undefined` when the request
   * carries no credential this function reads: the `auth` verifiers are
   * asked next, and without one that accepts, the answer is 401 with
   * `WWW-Authenticate`. A throw (or anything else) refuses the request
   * (401) and is logged. With a verifier, each task belongs to its
   * caller: another caller's task is TaskNotFound, and ListTasks shows each
   * caller its own.
   */
  authenticate?: (request: Request) => Principal | Response | null | undefined | Promise<Principal | Response | null | undefined>;
  /** The verifiers of the native `a2a.auth` block; the card's `securitySchemes` are derived from them. */
  auth?: A2AAuthConfig;
  /**
   * Where `${NAME}` in `auth.apiKeys.keys` and `auth.jwt.secretEnv` are
   * looked up (a worker's `env`). Default: `process.env` where there is one.
   */
  env?: Record<string, string | undefined>;
}

/** An authenticated caller. */
export interface Principal {
  /** Who (a user name, the JWT's `sub`). Non-empty. */
  subject: string;
  /** Who vouches for it (the JWT's `iss`): the same subject from two issuers is two callers. */
  issuer?: string;
  tenant?: string;
  scopes?: string[];
}

/**
 * The `a2a.auth` block. A request passes when one verifier accepts it.
 * JWT signatures are checked with WebCrypto (`crypto.subtle`): HS256, RS256,
 * ES256, and EdDSA (Ed25519) where the runtime has it. Keys come from
 * `jwksUrl` or the issuer's OpenID Connect discovery, fetched with `fetch`
 * and cached per `Cache-Control` (one re-fetch per unknown `kid`, rate
 * limited; the last good set is kept when the endpoint is down). Claims
 * checked: `iss`, `aud`, `exp` / `nbf` with `leewaySeconds`, `requiredScopes`.
 */
export interface A2AAuthConfig {
  apiKeys?: {
    /** Default "header". */
    in?: "header" | "query" | "cookie";
    /** Default "X-API-Key". */
    name?: string;
    /** Caller name to key; `${NAME}` expands from `env`. */
    keys: Record<string, string>;
  };
  jwt?: {
    issuer?: string;
    audience?: string;
    jwksUrl?: string;
    algorithms?: ("HS256" | "RS256" | "ES256" | "EdDSA")[];
    /** The variable of `env` holding the HS256 secret. */
    secretEnv?: string;
    /** Default 30. */
    leewaySeconds?: number;
    requiredScopes?: string[];
  };
}

/** What keeps a worker alive after the response (workerd's `ExecutionContext`). */
export interface WaitUntilContext {
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * Serves the card (`GET /.well-known/agent-card.json`) and JSON-RPC (`POST /`).
 * Call it as `handler(request, ctx?)`, or use it as a module worker's `fetch`
 * (`(request, env, ctx)`): whichever argument has `waitUntil` keeps task
 * fulfilment alive.
 *
 * `SendStreamingMessage` / `message/stream` and `SubscribeToTask` /
 * `tasks/resubscribe` answer `200 text/event-stream` with a `ReadableStream`
 * body: one `data: <JSON-RPC response>` frame per event (the task, then its
 * status and artifact updates), ending after the terminal one. Errors before
 * the stream (bad params, unknown task, a task already finished: -32004) are
 * plain JSON-RPC answers.
 */
export type A2AHandler = (
  request: Request,
  ctxOrEnv?: WaitUntilContext | unknown,
  ctx?: WaitUntilContext,
) => Promise<Response>;

export declare function createA2AHandler(options: A2AHandlerOptions): A2AHandler;
