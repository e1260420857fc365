//! `createClient` and the `Client` class: the LLM client loop.

use crate::convert::{
    core_error, get, is_absent, misuse, opt_string, opt_u64, req_string, ser_to_js, string_pairs,
};
use crate::handles::{self, Handle};
use crate::toolkit::CoreToolkit;
use crate::transport::JsTransport;
use js_sys::Promise;
use std::rc::Rc;
use toolnexus_core::llm::{LlmConfig, LlmStyle};
use wasm_bindgen::prelude::*;

/// `createClient({baseUrl, style, model, apiKey?, headers?, systemPrompt?,
/// maxTurns?, maxTokens?, timeout?})`.
#[wasm_bindgen(js_name = createClient)]
pub fn create_client(options: JsValue) -> Result<Client, JsValue> {
    const WHAT: &str = "createClient options";
    if !options.is_object() {
        return Err(misuse(
            "createClient takes {baseUrl, style, model, apiKey?, headers?, systemPrompt?, maxTurns?}",
        ));
    }
    let style: LlmStyle = req_string(&options, "style", WHAT)?
        .parse()
        .map_err(|e| core_error(&e))?;
    let mut cfg = LlmConfig::new(
        req_string(&options, "baseUrl", WHAT)?,
        style,
        req_string(&options, "model", WHAT)?,
    );
    cfg.api_key = opt_string(&options, "apiKey", WHAT)?;
    cfg.headers = string_pairs(&get(&options, "headers"), "createClient options.headers")?;
    cfg.system_prompt = opt_string(&options, "systemPrompt", WHAT)?;
    let small = |key: &str| -> Result<Option<u32>, JsValue> {
        opt_u64(&options, key, WHAT)?
            .map(|n| u32::try_from(n).map_err(|_| misuse(format!("{WHAT}.{key} is too large"))))
            .transpose()
    };
    if let Some(n) = small("maxTurns")? {
        cfg.max_turns = n;
    }
    if let Some(n) = small("maxTokens")? {
        cfg.max_tokens = n;
    }
    if let Some(ms) = opt_u64(&options, "timeout", WHAT)? {
        cfg.timeout = std::time::Duration::from_millis(ms);
    }
    let cfg = Rc::new(cfg);
    Ok(Client {
        handle: handles::register(Handle::Client(cfg.clone())),
        cfg,
    })
}

/// An LLM endpoint (OpenAI or Anthropic style). The API key never leaves it.
#[wasm_bindgen]
pub struct Client {
    handle: u32,
    cfg: Rc<LlmConfig>,
}

impl Drop for Client {
    fn drop(&mut self) {
        handles::release(self.handle);
    }
}

#[wasm_bindgen]
impl Client {
    /// See [`crate::handles`].
    #[wasm_bindgen(getter, js_name = __toolnexusHandle)]
    pub fn handle(&self) -> u32 {
        self.handle
    }

    /// `run(prompt, {toolkit}?)`: the tool loop until the model stops asking
    /// for tools or `maxTurns`. Resolves to a RunResult; rejects with a kinded
    /// `Error` when the model endpoint fails.
    pub fn run(&self, prompt: JsValue, options: JsValue) -> Promise {
        let cfg = self.cfg.clone();
        let toolkit = get(&options, "toolkit");
        let toolkit = match handles::find(&toolkit) {
            Some(Handle::Toolkit(s)) => Ok(s.current()),
            _ if is_absent(&toolkit) => Ok(Rc::new(CoreToolkit::new(JsTransport))),
            _ => Err(misuse(
                "options.toolkit must be a Toolkit from createToolkit",
            )),
        };
        let prompt = prompt
            .as_string()
            .ok_or_else(|| misuse("run(prompt): prompt must be a string"));
        crate::convert::promise(Box::pin(async move {
            let (toolkit, prompt) = (toolkit?, prompt?);
            let result = toolkit
                .run_llm(&cfg, &prompt)
                .await
                .map_err(|e| core_error(&e))?;
            Ok(ser_to_js(&result))
        }))
    }
}
