//! `toolnexus-agent.wasm`: an A2A agent as a `wasi:http/proxy` component.
//! Each instance reads its configuration from the environment once (see
//! `toolnexus_component::agent`); a configuration error answers every
//! request with a 500 that says what is wrong.

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
use {
    std::cell::OnceCell,
    std::sync::Arc,
    toolnexus_component::agent,
    wstd::http::{Body, Request, Response, Result},
};

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
type Server = Arc<
    toolnexus_core::server::A2aServer<
        agent::AgentStore,
        toolnexus_component::wasi_host::WasiHost,
        Arc<dyn toolnexus_core::server::Fulfiller>,
    >,
>;

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
thread_local! {
    /// The server of this instance (hosts may reuse an instance for more requests).
    static SERVER: OnceCell<std::result::Result<Server, String>> = const { OnceCell::new() };
}

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
#[wstd::http_server]
async fn main(request: Request<Body>) -> Result<Response<Body>> {
    let server = SERVER.with(|s| s.get_or_init(agent::from_env).clone());
    match server {
        Ok(server) => Ok(agent::handle(&server, request).await),
        Err(problem) => {
            eprintln!("toolnexus-agent: {problem}");
            let mut r = Response::new(Body::from(format!("toolnexus-agent: {problem}\n")));
            *r.status_mut() = wstd::http::StatusCode::INTERNAL_SERVER_ERROR;
            Ok(r)
        }
    }
}

#[cfg(not(all(target_arch = "wasm32", target_os = "wasi")))]
fn main() {}
