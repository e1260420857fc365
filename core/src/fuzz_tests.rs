//! Hostile input for every reader of peer or disk data, as bounded property
//! tests on stable Rust: a seeded generator (no dependency, the same inputs
//! on every run and on wasm32) that mutates valid samples and builds random
//! JSON from the protocol's own vocabulary. Every target must never panic;
//! most must also keep a property (the same events however the bytes are
//! split, unique tool names, a JSON answer to every request…). A crash found
//! here becomes a named regression test beside the code it broke.

use crate::client::card::AgentCard;
use crate::model::event::StreamEvent;
use crate::model::task::{SendResult, Shape, Task};
use crate::wire::http::HttpResponse;
use crate::wire::rpc::parse_reply;
use crate::wire::sse::SseParser;
use serde_json::{Map, Value};
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
use wasm_bindgen_test::wasm_bindgen_test as test;

/// Inputs per target: a few seconds each natively in a debug build.
const RUNS: usize = if cfg!(target_arch = "wasm32") {
    300
} else {
    30_000
};

/// xorshift64*: small, seeded, good enough to explore.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const KEYS: &[&str] = &[
    "securitySchemes",
    "securityRequirements",
    "security",
    "schemes",
    "list",
    "type",
    "in",
    "location",
    "flows",
    "clientCredentials",
    "tokenUrl",
    "scopes",
    "apiKeySecurityScheme",
    "oauth2SecurityScheme",
    "openIdConnectUrl",
    "access_token",
    "token_type",
    "expires_in",
    "id",
    "name",
    "url",
    "skills",
    "status",
    "state",
    "message",
    "parts",
    "text",
    "kind",
    "role",
    "result",
    "error",
    "code",
    "jsonrpc",
    "method",
    "params",
    "task",
    "taskId",
    "contextId",
    "messageId",
    "artifacts",
    "artifact",
    "artifactId",
    "append",
    "lastChunk",
    "history",
    "statusUpdate",
    "artifactUpdate",
    "supportedInterfaces",
    "additionalInterfaces",
    "protocolBinding",
    "protocolVersion",
    "transport",
    "preferredTransport",
    "capabilities",
    "streaming",
    "extensions",
    "uri",
    "description",
    "tags",
    "provider",
    "organization",
    "configuration",
    "blocking",
    "returnImmediately",
    "historyLength",
    "pageSize",
    "pageToken",
    "timestamp",
    "metadata",
    "data",
    "final",
];

const STRINGS: &[&str] = &[
    "",
    "completed",
    "working",
    "failed",
    "canceled",
    "input-required",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_WORKING",
    "ROLE_USER",
    "agent",
    "user",
    "text",
    "task",
    "status-update",
    "artifact-update",
    "message",
    "JSONRPC",
    "1.0",
    "0.3",
    "0.3.0",
    "SendMessage",
    "GetTask",
    "CancelTask",
    "message/send",
    "tasks/get",
    "SendStreamingMessage",
    "ListTasks",
    "http://h/",
    "//x",
    "/rpc",
    "http://u:p@h:1/a?b#c",
    "urn:toolnexus:a2a:get-task-long-poll:v1",
    "2025-12-01T22:50:00.123Z",
    "9999-99-99T99:99:99Z",
    "\u{1b}[2J",
    "\u{0}",
    "é😀",
    "\u{feff}",
];

fn random_json(rng: &mut Rng, depth: u32) -> Value {
    let leaf = depth == 0 || rng.below(3) == 0;
    match rng.below(if leaf { 5 } else { 7 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => match rng.below(4) {
            0 => Value::from(rng.next() as i64),
            1 => Value::from(rng.below(5) as i64 - 2),
            2 => serde_json::Number::from_f64((rng.next() as f64) / 7.0)
                .map_or(Value::Null, Value::Number),
            _ => Value::from(u64::MAX),
        },
        3 | 4 => Value::String(rng.pick(STRINGS).to_string()),
        5 => (0..rng.below(4))
            .map(|_| random_json(rng, depth - 1))
            .collect(),
        _ => {
            let mut map = Map::new();
            for _ in 0..rng.below(6) {
                map.insert(rng.pick(KEYS).to_string(), random_json(rng, depth - 1));
            }
            Value::Object(map)
        }
    }
}

const BYTES: &[u8] = b"\"{}[]:,\\\n\r\0\xff\xc3-0e.9 tnf";

/// A few random edits of `sample`: flips, inserts, deletes, repeats, cuts.
fn mutate(rng: &mut Rng, sample: &[u8]) -> Vec<u8> {
    let mut out = sample.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0 if at < out.len() => out[at] ^= 1 << rng.below(8),
            1 => out.insert(at, *rng.pick(BYTES)),
            2 if at < out.len() => {
                let end = (at + rng.below(16)).min(out.len());
                out.drain(at..end);
            }
            3 if at < out.len() => {
                let end = (at + rng.below(32)).min(out.len());
                let piece = out[at..end].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, piece);
            }
            4 => out.truncate(at),
            _ => out.insert(at, rng.below(256) as u8),
        }
    }
    out
}

/// A mutated sample, or random JSON from the protocol's vocabulary.
fn input(rng: &mut Rng, samples: &[&[u8]]) -> Vec<u8> {
    if rng.below(3) == 0 {
        let v = random_json(rng, 5);
        serde_json::to_vec(&v).unwrap_or_default()
    } else {
        let sample = rng.pick(samples);
        mutate(rng, sample)
    }
}

const CARDS: &[&[u8]] = &[
    br#"{"name":"desk","url":"http://127.0.0.1:9/","protocolVersion":"0.3.0","skills":[{"id":"greet","name":"greet","description":"hi","tags":["a"]}]}"#,
    br#"{"name":"h","url":"http://h/","preferredTransport":"JSONRPC","capabilities":{"streaming":true,"extensions":[{"uri":"urn:toolnexus:a2a:get-task-long-poll:v1"}]},"supportedInterfaces":[{"url":"/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"http://h/","transport":"JSONRPC","protocolVersion":"0.3"}],"skills":[{"id":"dup"},{"id":"dup"},{"name":"d.u.p"}]}"#,
];

#[test]
fn fuzz_the_card_reader_never_panics_and_names_stay_unique() {
    let mut rng = Rng::new(1);
    let agent = crate::Agent::new("http://127.0.0.1:9/.well-known/agent-card.json");
    for _ in 0..RUNS {
        let bytes = input(&mut rng, CARDS);
        let Ok(card) = AgentCard::parse(&bytes) else {
            continue;
        };
        let _ = card.summary(&agent.card);
        let tools = crate::client::toolkit::card_tools(&agent, &card);
        let mut names: Vec<&str> = tools.iter().map(|t| t.spec.name.as_str()).collect();
        names.sort_unstable();
        let all = names.len();
        names.dedup();
        assert_eq!(names.len(), all, "{}", String::from_utf8_lossy(&bytes));
    }
}

const SECURED_CARDS: &[&[u8]] = &[
    br#"{"name":"a","url":"http://127.0.0.1:9/","skills":[{"id":"s"}],"securitySchemes":{"k":{"apiKeySecurityScheme":{"location":"query","name":"key"}},"b":{"httpAuthSecurityScheme":{"scheme":"Bearer","bearerFormat":"JWT"}},"o":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://idp/t","scopes":{"a":"b"}}}}},"i":{"openIdConnectSecurityScheme":{"openIdConnectUrl":"https://idp/"}}},"securityRequirements":[{"schemes":{"o":{"list":["a"]}}},{}]}"#,
    br#"{"name":"a","url":"http://127.0.0.1:9/","skills":[],"securitySchemes":{"k":{"type":"apiKey","in":"cookie","name":"sid"},"h":{"type":"http","scheme":"basic"},"o":{"type":"oauth2","flows":{"clientCredentials":{"tokenUrl":"/t","scopes":{}}}},"i":{"type":"openIdConnect","openIdConnectUrl":"/oidc"}},"security":[{"o":["a","b"]},{"k":[]}]}"#,
];

/// Every credential kind, to plan against fuzzed cards.
fn auths() -> [crate::Auth; 4] {
    [
        crate::Auth::Bearer("t".into()),
        crate::Auth::ApiKey("k".into()),
        crate::Auth::OAuth2(crate::OAuth2Client {
            client_id: "c".into(),
            ..Default::default()
        }),
        crate::Auth::OAuth2(crate::OAuth2Client {
            client_id: "c".into(),
            token_url: Some("https://idp/t".into()),
            scopes: vec!["s".into()],
            ..Default::default()
        }),
    ]
}

#[test]
fn fuzz_the_card_scheme_reader_never_panics_and_plans_stay_placeable() {
    let mut rng = Rng::new(11);
    let card_url = "http://127.0.0.1:9/.well-known/agent-card.json";
    for _ in 0..RUNS {
        let bytes = input(&mut rng, SECURED_CARDS);
        let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        let schemes = crate::read_schemes(&v);
        let reqs = crate::read_requirements(&v);
        let _ = crate::requires_credentials(&reqs);
        for auth in auths() {
            if let Ok(Some(plan)) =
                crate::client::auth::plan(Some(&auth), card_url, &schemes, &reqs)
            {
                // Wherever it goes, the request stays a request to the same origin.
                let req = crate::HttpRequest::post_json("http://127.0.0.1:9/rpc", Vec::new());
                let sent = plan.placement.apply(req, "v");
                assert_eq!(crate::url_origin(&sent.url), Some("http://127.0.0.1:9"));
            }
        }
    }
}

const TOKEN_ANSWERS: &[&[u8]] = &[
    br#"{"access_token":"abc","token_type":"Bearer","expires_in":3600,"scope":"a b"}"#,
    br#"{"access_token":"abc","token_type":"bearer","expires_in":"60"}"#,
    br#"{"error":"invalid_client","error_description":"no such client"}"#,
];

#[test]
fn fuzz_the_token_answer_reader_never_panics() {
    let mut rng = Rng::new(12);
    for _ in 0..RUNS {
        let body = input(&mut rng, TOKEN_ANSWERS);
        let status = *rng.pick(&[200u16, 201, 400, 401, 500]);
        let resp = HttpResponse {
            status,
            headers: Vec::new(),
            body,
        };
        let now = rng.next();
        if let Ok(t) = crate::read_token_response(&resp, "https://idp/t", now) {
            assert!(!t.value.is_empty());
            assert!((200..300).contains(&status));
            assert!(t.expires_ms.is_none_or(|e| e >= now));
        }
    }
}

const REPLIES: &[&[u8]] = &[
    br#"{"jsonrpc":"2.0","id":1,"result":{"id":"t1","contextId":"c","kind":"task","status":{"state":"completed","message":{"role":"agent","parts":[{"kind":"text","text":"ok"}]}},"artifacts":[{"artifactId":"a","parts":[{"kind":"text","text":"x"}]}],"history":[]}}"#,
    br#"{"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t1","status":{"state":"TASK_STATE_WORKING","timestamp":"2025-12-01T22:50:00Z"}}}}"#,
    br#"{"jsonrpc":"2.0","id":1,"result":{"statusUpdate":{"taskId":"t1","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}}}"#,
    br#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t","artifact":{"parts":[{"text":"a"}]},"append":true,"lastChunk":false}}"#,
    br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#,
];

#[test]
fn fuzz_json_rpc_replies_never_panic_any_reader() {
    let mut rng = Rng::new(2);
    for _ in 0..RUNS {
        let body = input(&mut rng, REPLIES);
        let resp = HttpResponse {
            status: *rng.pick(&[200, 200, 200, 404, 429, 500]),
            headers: vec![],
            body,
        };
        let Ok(result) = parse_reply(&resp, "http://peer/") else {
            continue;
        };
        for v in [&result, result.get("task").unwrap_or(&result)] {
            if let Some(task) = Task::from_value(v) {
                let _ = (task.output_text(), task.to_value(Shape::V10));
            }
            let _ = SendResult::from_value(v);
            if let Some(event) = StreamEvent::from_value(v) {
                let _ = serde_json::to_string(&event.shaped(Shape::V03));
            }
        }
    }
}

/// Hostile peers are also hostile as a whole call: random replies to every
/// request of the outbound call, which must end (bounded), never panic.
#[test]
fn fuzz_the_outbound_call_against_random_replies() {
    use crate::testing::{block_on, Reply, ScriptedPeer};
    let mut rng = Rng::new(3);
    for _ in 0..RUNS / 10 {
        let mut script = ScriptedPeer::new();
        for method in [
            "SendMessage",
            "GetTask",
            "SendStreamingMessage",
            "CancelTask",
            "SubscribeToTask",
        ] {
            let replies = (0..1 + rng.below(4))
                .map(|_| match rng.below(5) {
                    0 => Reply::Busy(
                        *rng.pick(&[429, 503]),
                        *rng.pick(&[None, Some("0"), Some("1"), Some("x")]),
                    ),
                    1 => Reply::Stream(vec![(rng.below(50) as u64, random_json(&mut rng, 4))]),
                    2 => Reply::Delay(
                        rng.below(500) as u64,
                        Box::new(Reply::Result(random_json(&mut rng, 4))),
                    ),
                    _ => Reply::Result(random_json(&mut rng, 4)),
                })
                .collect();
            script = script.on(method, replies);
        }
        let spec = crate::client::call::CallSpec {
            agent: "a".into(),
            endpoint: "http://peer/".into(),
            dialect: *rng.pick(&[
                crate::Dialect::Toolnexus,
                crate::Dialect::V03,
                crate::Dialect::V10,
            ]),
            headers: vec![],
            timeout_ms: 3_000,
            poll_every_ms: 100,
            message_id: "m".into(),
            text: "t".into(),
            long_poll: rng.below(2) == 0,
            streaming: rng.below(2) == 0,
            started_ms: None,
            jitter_seed: rng.next(),
            auth: None,
        };
        let no_tokens = |_| std::future::ready(Err(crate::Error::Misuse("no tokens".into())));
        let result = block_on(crate::host::driver::drive_with_work(
            &mut crate::client::call::CallMachine::new(spec),
            &script,
            std::future::pending(),
            |_| {},
            no_tokens,
        ));
        let ms = result.metadata.as_ref().and_then(|m| m["ms"].as_u64());
        assert!(
            ms.is_some_and(|ms| ms <= 3_000 + crate::client::call::TIMEOUT_CANCEL_GRACE_MS),
            "{result:?}"
        );
        assert!(
            script.requests().len() < 200,
            "{} requests in 3 s",
            script.requests().len()
        );
    }
}

const STREAMS: &[&[u8]] = &[
    b"data: {\"a\":1}\n\nevent: x\ndata: 2\ndata: 3\nid: 7\nretry: 100\n\n: ping\n\n",
    b"data:x\r\n\r\ndata: y\r\rdata:z\n\n",
    b"\xef\xbb\xbfdata: bom\n\nid\nevent\ndata\n\n",
];

/// An event as `(type, data, id)`, or the decoder's error.
type Seen = Result<(Option<String>, String, Option<String>), String>;

fn events(parser: &mut SseParser) -> Vec<Seen> {
    let mut out = Vec::new();
    while let Some(next) = parser.next_event() {
        let failed = next.is_err();
        out.push(
            next.map(|e| (e.event, e.data, e.id))
                .map_err(|e| e.to_string()),
        );
        // The error is the decoder's last word (it repeats it on every call).
        if failed {
            break;
        }
    }
    out
}

#[test]
fn fuzz_the_sse_parser_gives_the_same_events_however_the_bytes_are_split() {
    let mut rng = Rng::new(4);
    for _ in 0..RUNS {
        let sample = STREAMS[rng.below(STREAMS.len())];
        let bytes = mutate(&mut rng, sample);
        let limit = *rng.pick(&[16, 64, 1 << 20]);
        let mut whole = SseParser::with_limit(limit);
        whole.feed(&bytes);
        whole.finish();
        let expected = events(&mut whole);
        let mut split = SseParser::with_limit(limit);
        let mut got = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() && !got.last().is_some_and(|e: &Result<_, _>| e.is_err()) {
            let (chunk, tail) = rest.split_at(1 + rng.below(rest.len()));
            split.feed(chunk);
            got.extend(events(&mut split));
            rest = tail;
        }
        split.finish();
        if !got.last().is_some_and(|e| e.is_err()) {
            got.extend(events(&mut split));
        }
        assert_eq!(got, expected, "{:?}", String::from_utf8_lossy(&bytes));
    }
}

#[cfg(feature = "skill-md")]
const SKILLS: &[&[u8]] = &[
    b"---\nname: review\ndescription: Reviews a diff\n---\n\n# Review\nRead it.\n",
    b"\xef\xbb\xbf---\r\nname: \"q\"\r\ndescription: 5\r\nx: &a [*a]\r\n---\r\nbody",
    b"---\nname: a\ndescription: |\n  multi\n  line\ntags: [x, y]\n---\n",
];

#[cfg(feature = "skill-md")]
#[test]
fn fuzz_the_skill_md_frontmatter_reader_never_panics() {
    let mut rng = Rng::new(5);
    for _ in 0..RUNS {
        let sample = SKILLS[rng.below(SKILLS.len())];
        let bytes = mutate(&mut rng, sample);
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(skill) = crate::skills::parse_skill_md(&text) {
            assert!(!skill.name.trim().is_empty(), "{text:?}");
        }
    }
}

const STORED: &[&[u8]] = &[
    br#"{"id":"t1","contextId":"c1","kind":"task","status":{"state":"completed","timestamp":"2025-12-01T22:50:00.123Z","message":{"role":"agent","messageId":"m2","parts":[{"kind":"text","text":"done"}]}},"history":[{"role":"user","messageId":"m1","parts":[{"kind":"text","text":"q"}]}],"artifacts":[{"artifactId":"a1","parts":[{"kind":"text","text":"x"}]}]}"#,
    br#"{"id":"t2","status":{"state":"working"}}"#,
];

/// What `FileStore` does with a file: JSON, then a task. A task read back
/// from what it writes is the same task.
#[test]
fn fuzz_the_stored_task_reader_never_panics_and_reads_back_what_it_writes() {
    let mut rng = Rng::new(6);
    for _ in 0..RUNS {
        let bytes = input(&mut rng, STORED);
        let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        let Some(task) = Task::from_value(&value) else {
            continue;
        };
        let written = task.to_value(Shape::V03);
        let again = Task::from_value(&written).expect("a written task reads back");
        assert_eq!(
            again.to_value(Shape::V03),
            written,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
}

#[cfg(feature = "server")]
#[test]
fn fuzz_json_rpc_requests_to_the_server_always_get_a_json_answer() {
    use crate::server::{A2aServer, EchoFulfiller, MemoryStore, ServerHost, ServerOptions};
    use crate::testing::{run_with_work, Jobs};
    use std::sync::Arc;

    struct Host(std::sync::atomic::AtomicU64);
    impl crate::HostBase for Host {
        fn new_id(&self) -> String {
            format!(
                "id{}",
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            )
        }
        fn now_ms(&self) -> u64 {
            0
        }
    }

    impl ServerHost for Host {
        type Locks = crate::testing::TestLocks;
    }
    // On wasm32 jobs are not `Send`; the test is single-threaded anyway.
    #[allow(clippy::arc_with_non_send_sync)]
    let jobs = Arc::new(Jobs::default());
    let card = crate::server::build_agent_card(&Default::default(), &[], "http://127.0.0.1:1/");
    let options = ServerOptions {
        card: Some(card.into()),
        ..Default::default()
    };
    let server = A2aServer::new(
        options,
        MemoryStore::<crate::testing::TestLocks>::default(),
        Host(Default::default()),
        EchoFulfiller,
    );
    const REQUESTS: &[&[u8]] = &[
        br#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}}"#,
        br#"{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"id":"id1","historyLength":1}}"#,
        br#"{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":{"pageSize":2,"status":"TASK_STATE_COMPLETED"}}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"CancelTask","params":{"id":"id1"}}"#,
        br#"[{"jsonrpc":"2.0","id":4,"method":"message/send","params":{}}]"#,
    ];
    let mut rng = Rng::new(7);
    for _ in 0..RUNS {
        let body = input(&mut rng, REQUESTS);
        let mut req = crate::HttpRequest::post_json("/", body);
        if rng.below(2) == 0 {
            req = req.with_header(
                "A2A-Version",
                *rng.pick(&["1.0", "0.3", "", "9", "1.x\u{0}"]),
            );
        }
        let shown = format!("{req:?} {}", String::from_utf8_lossy(&req.body));
        let resp = run_with_work(server.handle(req), &jobs, || server.take_work());
        let streamed = resp
            .header("Content-Type")
            .is_some_and(crate::wire::sse::is_event_stream);
        if !streamed && !resp.body.is_empty() {
            let v: Value = serde_json::from_slice(&resp.body).unwrap_or_else(|e| {
                panic!(
                    "{e}: {resp:?} {} for {shown}",
                    String::from_utf8_lossy(&resp.body)
                )
            });
            assert!(
                v.get("result").is_some() || v.get("error").is_some() || v.is_array(),
                "{v}"
            );
        }
    }
}

#[cfg(feature = "server")]
const AUTH_BLOCKS: &[&[u8]] = &[
    br#"{"apiKeys":{"in":"header","name":"X-API-Key","keys":{"alice":"${ALICE_KEY}","bob":"${BOB_KEY}"}}}"#,
    br#"{"apiKeys":{"in":"cookie","name":"k","keys":{"a":"k1"}},"jwt":{"secretEnv":"HS","leewaySeconds":5}}"#,
    br#"{"jwt":{"issuer":"https://id.example","audience":"a2a","jwksUrl":"https://id.example/jwks","algorithms":["RS256","ES256","EdDSA"],"leewaySeconds":30,"requiredScopes":["a2a.call"]}}"#,
    br#"{"jwt":{"issuer":"https://id.example/","algorithms":["none","HS256"]}}"#,
];

/// The `a2a.auth` reader: never a panic, and what it accepts is never weak
/// (an empty or shared key, `none`, HS256 beside asymmetric keys, no verifier).
#[cfg(feature = "server")]
#[test]
fn fuzz_the_auth_config_reader_never_panics_nor_accepts_a_weak_block() {
    use crate::server::auth::{AuthConfig, JWT_ALGORITHMS};
    let env = |name: &str| match name {
        "ALICE_KEY" => Some("alice-secret".to_string()),
        "BOB_KEY" => Some("bob-secret".to_string()),
        "HS" => Some("hs-secret".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let mut rng = Rng::new(8);
    for _ in 0..RUNS {
        let bytes = input(&mut rng, AUTH_BLOCKS);
        let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        let Ok(config) = AuthConfig::from_value(&value, env) else {
            continue;
        };
        let shown = String::from_utf8_lossy(&bytes);
        assert!(config.api_keys.is_some() || config.jwt.is_some(), "{shown}");
        if let Some(keys) = &config.api_keys {
            assert!(!keys.keys.is_empty(), "{shown}");
            for (i, (_, k)) in keys.keys.iter().enumerate() {
                assert!(!k.is_empty(), "an empty key: {shown}");
                assert!(
                    keys.keys[..i].iter().all(|(_, other)| other != k),
                    "a shared key: {shown}"
                );
            }
        }
        if let Some(jwt) = &config.jwt {
            assert!(!jwt.algorithms.is_empty(), "{shown}");
            for alg in &jwt.algorithms {
                assert!(JWT_ALGORITHMS.contains(&alg.as_str()), "{alg}: {shown}");
            }
            let hs = jwt.algorithms.iter().any(|a| a == "HS256");
            assert_eq!(hs, jwt.secret_env.is_some(), "{shown}");
            if hs {
                assert!(jwt.algorithms.iter().all(|a| a == "HS256"), "{shown}");
                assert!(jwt.jwks_url.is_none(), "{shown}");
            }
        }
    }
}

/// The credential readers (an API key in a header, query or cookie; a
/// bearer token) on hostile requests, and the claims check on hostile
/// claims: never a panic; a principal always has a subject, and a key
/// accepted is exactly a configured one.
#[cfg(feature = "server")]
#[test]
fn fuzz_the_credential_readers_and_the_claims_check_never_panic() {
    use crate::server::auth::{ApiKeys, JwtConfig, KeyLocation};
    use crate::server::verify::{api_key, bearer, check_claims, key_owner};
    const PIECES: &[&str] = &[
        "k",
        "key",
        "=",
        ";",
        "&",
        "?",
        "%",
        "%2",
        "%41",
        "%zz",
        "%ff",
        "+",
        " ",
        "\"",
        "Bearer",
        "bearer ",
        "alice-key",
        "é",
        "\u{0}",
        "#",
        "api_key",
        "/",
        "X-API-Key",
    ];
    let text = |rng: &mut Rng| -> String { (0..rng.below(8)).map(|_| *rng.pick(PIECES)).collect() };
    let mut rng = Rng::new(9);
    let locations = [KeyLocation::Header, KeyLocation::Query, KeyLocation::Cookie];
    for _ in 0..RUNS {
        let keys = ApiKeys {
            location: *rng.pick(&locations),
            name: rng.pick(&["k", "key", "api_key", "X-API-Key"]).to_string(),
            keys: vec![
                ("alice".into(), "alice-key".into()),
                ("bob".into(), "b".into()),
            ],
        };
        let mut req = crate::HttpRequest::post_json(format!("/{}", text(&mut rng)), Vec::new());
        for _ in 0..rng.below(4) {
            let name = rng.pick(&["Cookie", "Authorization", "k", "X-API-Key", "api_key"]);
            req = req.with_header(*name, text(&mut rng));
        }
        if let Some(given) = api_key(&req, &keys) {
            assert!(!given.is_empty());
            if let Some(who) = key_owner(&keys, given.as_bytes()) {
                assert!(keys.keys.iter().any(|(s, k)| s == who && *k == given));
            }
        }
        if let Some(token) = bearer(&req) {
            assert!(!token.is_empty() && !token.starts_with(' '));
        }
        let claims = match random_json(&mut rng, 3) {
            Value::Object(mut map) => {
                for key in ["exp", "nbf", "iss", "aud", "sub", "scope", "scp"] {
                    if rng.below(2) == 0 {
                        map.insert(key.into(), random_json(&mut rng, 2));
                    }
                }
                map
            }
            _ => Map::new(),
        };
        let jwt = JwtConfig {
            issuer: Some("https://id.example".into()).filter(|_| rng.below(2) == 0),
            audience: Some("a2a".into()).filter(|_| rng.below(2) == 0),
            leeway_seconds: rng.below(100) as u64,
            required_scopes: if rng.below(2) == 0 {
                vec!["text".into()]
            } else {
                Vec::new()
            },
            ..JwtConfig::default()
        };
        let now = [None, Some(0), Some(u64::MAX), Some(1_764_547_200_000)];
        if let Ok(p) = check_claims(&jwt, &claims, *rng.pick(&now)) {
            assert!(!p.subject.is_empty(), "{claims:?}");
        }
    }
}

/// The stored form of a task with an owner reads back with it.
#[test]
fn fuzz_the_stored_form_keeps_the_owner() {
    let mut rng = Rng::new(10);
    for _ in 0..RUNS / 10 {
        let bytes = input(&mut rng, STORED);
        let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        let Some(mut task) = Task::from_stored(&value) else {
            continue;
        };
        task.owner = Some(rng.pick(STRINGS).to_string());
        let stored = serde_json::to_value(task.stored()).expect("stored");
        let again = Task::from_stored(&stored).expect("reads back");
        assert_eq!(again.owner, task.owner);
        assert!(task.to_value(task.dialect).get("owner").is_none());
    }
}
