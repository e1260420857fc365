// Type declarations of toolnexus-wasm: call A2A agents as tools.
// (The full entry "toolnexus-wasm" adds the server half below this part.)

/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | JsonObject;

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/** What `error.kind` says about a thrown `Error`. */
export type ErrorKind =
  /** No HTTP answer at all (down, DNS, refused, CORS in browsers). */
  | "transport"
  /** The peer answered with a non-2xx HTTP status (see `status`, `url`). */
  | "status"
  /** The peer answered, but not with what the protocol says (not JSON, not a card). */
  | "malformed"
  /** The peer returned a JSON-RPC error (see `code`). */
  | "rpc"
  /** The caller passed something unusable. */
  | "misuse";

/** Every `Error` this package throws or rejects with. */
export interface ToolnexusError extends Error {
  kind: ErrorKind;
  /** HTTP status, for kind "status". */
  status?: number;
  /** The URL that answered, for kind "status". */
  url?: string;
  /** The JSON-RPC error code, for kind "rpc". */
  code?: number;
}

/** A remote A2A agent. Unset fields stay unset; defaults apply when it is resolved. */
export interface Agent {
  /** The Agent Card URL, e.g. `https://host/.well-known/agent-card.json`. */
  card: string;
  /**
   * Extra request headers. `${NAME}` in a value expands from `process.env`
   * (where there is one) at every call; values are secrets and never appear
   * in errors.
   */
  headers?: Record<string, string>;
  /** Overall time limit of one call (and of the card fetch) in ms. Default 300000. */
  timeout?: number;
  /** Poll interval in ms. Default 1000. */
  pollEvery?: number;
  /**
   * Advertise the optional `taskId` and `contextId` arguments in the tools'
   * input schema, so a model can answer a task waiting for input and continue
   * a conversation. Default false: the fixed `{task}` schema (`execute`
   * accepts the ids either way).
   */
  conversational?: boolean;
  /**
   * The caller's credential for this agent's protected calls, placed as the
   * card's `securitySchemes` say: `{bearer}` (`Authorization: Bearer`),
   * `{apiKey}` (the header, query parameter or cookie of the card's apiKey
   * scheme), or `{oauth2}` (client credentials: tokens fetched from
   * `tokenUrl`, default the card's client-credentials flow or its OpenID
   * Connect discovery; cached, refreshed before expiry, one fetch shared by
   * concurrent calls, one retry with a fresh token on 401; in the full entry
   * `toolnexus-wasm` only: `toolnexus-wasm/client`, the browser entry, throws a
   * `misuse` Error for it, use `getToken` there). `${NAME}` in a
   * value expands from `process.env` at every call. Credentials go only to
   * the card's own origin and `allowedOrigins`.
   */
  auth?: AgentAuth;
  /**
   * A bearer token from your code, asked for before every call (a browser
   * user's login): resolve to the current token. When the agent refuses it
   * (HTTP 401), it is asked once more with `{retry: true}` (renew it then)
   * and the request is sent again once. Not with `auth`.
   */
  getToken?: (hint: { retry: boolean }) => string | Promise<string>;
  /**
   * Origins (`https://host[:port]`) besides the card's own that may receive
   * the credentials (`auth`, `getToken`, `headers`) when the card names an
   * endpoint there. Elsewhere the call goes without them (with a warning),
   * or is refused when the card requires them.
   */
  allowedOrigins?: string[];
}

/** A caller credential, the shapes of an `agents.<name>.auth` config entry. */
export type AgentAuth =
  | { bearer: string }
  | { apiKey: string }
  | { oauth2: { clientId: string; clientSecret: string; tokenUrl?: string; scopes?: string[] } };

/** An agent descriptor, or just its card URL. */
export type AgentLike = Agent | string;

/** One entry of an `agents` config block. */
export interface AgentConfigEntry extends Agent {
  enabled?: boolean;
  disabled?: boolean;
}

/** An `agents` config block: `{ "<id>": {card, headers?, auth?, allowedOrigins?, timeout?, pollEvery?, enabled?, disabled?, conversational?} }`. */
export type AgentsConfig = Record<string, AgentConfigEntry>;

/** Where a tool comes from. */
export type ToolSource = "a2a" | "skill" | "host";

/** A tool as a model sees it. */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: JsonObject;
  source: ToolSource;
}

/** The state of an A2A task. */
export type TaskStateName =
  | "submitted"
  | "working"
  | "input-required"
  | "auth-required"
  | "completed"
  | "failed"
  | "canceled"
  | "rejected"
  | "unknown";

/** `metadata` of every A2A tool result. */
export interface A2AResultMetadata {
  /** The remote card's name. */
  agent: string;
  /** The remote task id (`null` when no task was created). */
  taskId: string | null;
  state: TaskStateName;
  /** GetTask requests made. */
  polls: number;
  /** Duration of the call. */
  ms: number;
  /**
   * The task's context, when the task waits for the caller (`input-required`,
   * `auth-required`): answer with `execute({task: answer, taskId, contextId})`.
   */
  contextId?: string;
  /** The answer's file and data parts (A2A 1.0 shape); the output keeps its text. */
  parts?: A2AFilePart[];
}

/** A non-text part of an answer: a file (inline base64 `raw`, or `url`) or `data`. */
export interface A2AFilePart {
  raw?: string;
  url?: string;
  data?: JsonValue;
  mediaType?: string;
  filename?: string;
  metadata?: JsonObject;
}

/** The outcome of running a tool. Tools report failure here instead of throwing. */
export interface ToolResult {
  output: string;
  isError: boolean;
  /** Always set for A2A tools; whatever a host tool returned otherwise. */
  metadata?: A2AResultMetadata | JsonObject;
}

/** A text part of a message or an artifact. */
export interface TextPart {
  kind: "text";
  text: string;
}

/** A message of the agent (a status message) or of the user. */
export interface A2AMessage {
  kind: "message";
  role: "user" | "agent";
  messageId: string;
  parts: TextPart[];
  contextId?: string;
  taskId?: string;
}

/** A task's status. */
export interface TaskStatus {
  state: TaskStateName;
  message?: A2AMessage;
}

/** An artifact (or, in an artifact-update, a chunk of one). */
export interface A2AArtifact {
  artifactId: string;
  parts: TextPart[];
}

/** The whole task: the first event of a stream, and what each answer or poll shows. */
export interface TaskSnapshotEvent {
  kind: "task";
  id: string;
  contextId: string;
  status: TaskStatus;
  artifacts?: A2AArtifact[];
  history?: A2AMessage[];
}

/** The task's status changed. `final` is true on the event that ends the stream. */
export interface StatusUpdateEvent {
  kind: "status-update";
  taskId: string;
  contextId: string;
  status: TaskStatus;
  final: boolean;
}

/** An artifact, or a chunk of one: `append` adds its parts to the artifact with that id. */
export interface ArtifactUpdateEvent {
  kind: "artifact-update";
  taskId: string;
  contextId: string;
  artifact: A2AArtifact;
  append: boolean;
  lastChunk: boolean;
}

/**
 * One event of a call, in the A2A 0.3 shape whatever the peer speaks: stream
 * events from a peer that streams, else the task as the answer and each poll
 * show it (only when it changed). A `message` is an agent's direct answer.
 */
export type CallEvent = TaskSnapshotEvent | StatusUpdateEvent | ArtifactUpdateEvent | A2AMessage;

/** A card as a UI shows it (`describeCard`). */
export interface CardSummary {
  name: string;
  description: string | null;
  version: string | null;
  /** `provider.organization`. */
  provider: string | null;
  dialect: "1.0" | "0.3" | "toolnexus";
  /** Why the card reads as that dialect, in words. */
  dialectReason: string;
  /** The JSON-RPC endpoint calls go to. */
  endpoint: string;
  streaming: boolean;
  longPoll: boolean;
  /** How a call follows its task: the SSE stream, one blocking send, or GetTask polls. */
  follow: "stream" | "block" | "poll";
  skills: { id: string | null; name: string | null; description: string | null; tags: string[] }[];
}

/**
 * A call followed as an async iterator of its events (`for await (const e of
 * tool.stream(args))`); `result` settles with the call's result. Leaving the
 * loop early stops listening, not the call: abort it with `signal`.
 */
export interface CallStream extends AsyncIterableIterator<CallEvent> {
  readonly result: Promise<ToolResult>;
}

/** Options of `execute`. */
export interface ExecuteOptions {
  /** Aborting stops the call and cancels the remote task (best effort). */
  signal?: AbortSignal;
  /** Called with each event of an A2A tool's task as it happens. A throw is logged and ignored. */
  onEvent?: (event: CallEvent) => void;
  /**
   * A W3C trace context `traceparent` (`00-<trace id>-<span id>-<flags>`):
   * every request of the call carries the trace on, each as a span of its
   * own. An invalid one is ignored.
   */
  traceparent?: string;
  /** The `tracestate` that goes with `traceparent`. */
  tracestate?: string;
  /**
   * `Tool.execute` only: gets the call's spans (`execute_tool {tool}`, the
   * child of `traceparent`, and an `a2a.client {method}` per request under
   * it). With no `traceparent`, the call starts a trace of its own.
   * (A toolkit's calls go to `createToolkit`'s `onSpan`.) Full entry
   * "toolnexus-wasm" only: "toolnexus-wasm/client" throws a `misuse` Error.
   */
  onSpan?(span: Span): void;
}

/**
 * A span for an OpenTelemetry exporter (`onSpan`; the `.wasm` has none).
 * Names and attributes follow the draft A2A and GenAI semantic conventions:
 * `a2a.server {method}` (a request served: `rpc.method`, `a2a.binding`,
 * `a2a.dialect`, `a2a.outcome`, `rpc.jsonrpc.error_code`), `a2a.task` (one
 * turn of a task: `a2a.task.id`, `a2a.context.id`, `a2a.task.state`, each
 * state an event), `chat {model}` (`gen_ai.provider.name`,
 * `gen_ai.request.model`, `gen_ai.usage.input_tokens`/`output_tokens` when
 * reported), `execute_tool {tool}` (`gen_ai.tool.name`, `gen_ai.tool.type`
 * `function` or `agent`), `a2a.client {method}` (an agent request:
 * `rpc.method`, `server.address`, `http.response.status_code`).
 */
export interface Span {
  name: string;
  kind: "server" | "client" | "internal";
  /** 32 hex digits. */
  traceId: string;
  /** 16 hex digits: the `traceparent` span id the next hop saw, where there is one. */
  spanId: string;
  /** The parent span (16 hex digits); absent for the root of a trace. */
  parentSpanId?: string;
  /** Milliseconds since the epoch. */
  startTimeMs: number;
  endTimeMs: number;
  /** OpenTelemetry attributes, as strings. */
  attributes: Record<string, string>;
  /** A task's states as they came (`a2a.task`); empty for the others. */
  events: { name: "a2a.task.state"; timeMs: number; attributes: Record<string, string> }[];
  status: "ok" | "error";
}

/** The arguments of an A2A tool. */
export interface A2AToolArgs {
  task: string;
  /** Answer the question of this task (the `taskId` of an input-required result). */
  taskId?: string;
  /** Send the message in this conversation (a result's `contextId`). */
  contextId?: string;
}

/** One skill of a remote agent, callable as a tool. */
export interface Tool extends ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: JsonObject;
  readonly source: "a2a";
  /**
   * Sends the task and follows it until it settles: the peer's SSE stream
   * when its card says `capabilities.streaming`, else a blocking send (A2A)
   * or polling (toolnexus dialect). Never rejects.
   */
  execute(args: A2AToolArgs, options?: ExecuteOptions): Promise<ToolResult>;
  /** `execute` as an async iterator of the task's events, with the result as `.result`. */
  stream(args: A2AToolArgs, options?: ExecuteOptions): CallStream;
  /** The spec as plain data. */
  toJSON(): ToolSpec;
  /** Frees the Rust side now (it is also freed when garbage collected). */
  free(): void;
}

/** What a host tool's `execute` may return. */
export type HostToolReturn =
  | string
  | { output: JsonValue; isError?: boolean; metadata?: JsonObject }
  | JsonValue
  | undefined;

/** A tool the host implements in JavaScript. */
export interface HostTool {
  name: string;
  description?: string;
  /** JSON Schema of the arguments. Default `{type: "object", properties: {}}`. */
  inputSchema?: JsonObject;
  /** Runs the tool; a throw or rejection becomes `{isError: true}`. */
  execute(args: JsonObject): HostToolReturn | Promise<HostToolReturn>;
}

/** `createToolkit` options. */
export interface ToolkitOptions {
  /** A2A agents, resolved concurrently; one that fails is logged and skipped. */
  agents?: AgentLike[];
  /** A config object; its `agents` block is added like `agents`. */
  config?: { agents?: AgentsConfig | null; [key: string]: unknown };
  /** Host tools. */
  tools?: HostTool[];
  /**
   * Gets the spans of the toolkit's agent calls (`execute_tool {tool}` and
   * an `a2a.client {method}` per request), in the trace of `execute`'s
   * `traceparent` (or a new one). Full entry "toolnexus-wasm" only:
   * "toolnexus-wasm/client" throws a `misuse` Error.
   */
  onSpan?(span: Span): void;
}

/** An OpenAI chat-completions `tools` entry. */
export interface OpenAITool {
  type: "function";
  function: { name: string; description: string; parameters: JsonObject };
}

/** An Anthropic messages `tools` entry. */
export interface AnthropicTool {
  name: string;
  description: string;
  input_schema: JsonObject;
}

/** A Gemini `functionDeclarations` entry. */
export interface GeminiFunctionDeclaration {
  name: string;
  description: string;
  parameters: JsonObject;
}

/** An agent the toolkit could not resolve. */
export interface AgentFailure {
  card: string;
  kind: ErrorKind;
  message: string;
}

/** Tools from A2A agents, skills and the host behind one `execute`. Names are unique: the first wins. */
export interface Toolkit {
  tools(): ToolSpec[];
  get(name: string): ToolSpec | undefined;
  /** Never rejects; an unknown name is `{isError: true, output: "Unknown tool: <name>"}`. */
  execute(name: string, args: JsonObject, options?: ExecuteOptions): Promise<ToolResult>;
  /** `execute` as an async iterator of an A2A tool's events, with the result as `.result`. */
  stream(name: string, args: JsonObject, options?: ExecuteOptions): CallStream;
  /** Resolves one more agent; the names of the tools it added. Rejects with a `ToolnexusError`. */
  addAgent(agent: AgentLike): Promise<string[]>;
  toOpenAI(): OpenAITool[];
  toAnthropic(): AnthropicTool[];
  toGemini(): GeminiFunctionDeclaration[];
  failures(): AgentFailure[];
  free(): void;
}

/** Checks a descriptor and returns it as plain data. Throws a `ToolnexusError` (misuse). */
export declare function agent(descriptor: AgentLike): Agent;

/** Fetches the card: one `Tool` per skill. Rejects with a `ToolnexusError`. */
export declare function agentTools(agent: AgentLike): Promise<Tool[]>;

/** One task as `listTasks` gives it. */
export interface TaskSummary {
  id: string;
  contextId: string;
  state: TaskStateName;
  /** When its status last changed (RFC 3339), when the agent says. */
  timestamp?: string;
  /** A completed task's answer, else its status message (a question, an error); may be empty. */
  text: string;
}

/**
 * The agent's tasks (A2A 1.0 ListTasks, every page up to 20 of 100), newest
 * status change first, optionally of one context or in one state. Bounded by
 * the agent's timeout. Rejects with a `ToolnexusError` (an agent without
 * ListTasks: kind "rpc").
 */
export declare function listTasks(
  agent: AgentLike,
  filter?: { contextId?: string; status?: TaskStateName },
): Promise<{ tasks: TaskSummary[]; totalSize?: number; truncated: boolean }>;

/** The enabled agents of an `agents` block (`null` gives `[]`). */
export declare function parseAgentsConfig(block: AgentsConfig | null | undefined): Agent[];

/** Gathers tools from agents, a config block, skills and host tools. */
export declare function createToolkit(options?: ToolkitOptions): Promise<Toolkit>;

/** Replaces every character outside `[a-zA-Z0-9_-]` with `_`. */
export declare function sanitize(s: string): string;

/**
 * Reads a card (JSON text or an object) fetched from `cardUrl` by the rules
 * the calls use. Throws an Error of kind `malformed` when it is not a card.
 */
export declare function describeCard(card: string | JsonObject, cardUrl: string): CardSummary;
