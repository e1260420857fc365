// Reading an Agent Card for display: identity, the dialect the client will
// speak and its JSON-RPC endpoint. The package resolves cards itself but does
// not hand back the card, so this mirrors the core's rule
// (toolnexus-core `AgentCard::endpoint`):
//   a JSONRPC interface with protocolVersion 1.x      => A2A 1.0, its url;
//   else a top-level url, with 0.3 markers
//        (preferredTransport or any interface)       => A2A 0.3, that url;
//   else a top-level url                             => toolnexus, that url;
//   else a JSONRPC interface                         => A2A 0.3, its url;
//   else                                             => toolnexus, the card's origin + "/".

/** The dialects, as the UI names them. */
export const DIALECTS = {
  "1.0": { label: "A2A 1.0", why: "the card lists a JSON-RPC interface of protocol 1.x" },
  "0.3": { label: "A2A 0.3", why: "the card has A2A 0.3 markers (preferredTransport or interfaces)" },
  toolnexus: { label: "toolnexus", why: "the card has a bare url and no A2A 0.3/1.0 markers" },
};

function str(v) {
  return typeof v === "string" ? v : undefined;
}

function resolve(cardUrl, ref) {
  try {
    return new URL(ref, cardUrl).href;
  } catch {
    return ref;
  }
}

function interfaces(card) {
  const list = [card.supportedInterfaces, card.additionalInterfaces]
    .filter(Array.isArray)
    .flat();
  return list
    .map((i) => ({
      url: str(i?.url),
      binding: str(i?.protocolBinding) ?? str(i?.transport),
      version: str(i?.protocolVersion),
    }))
    .filter((i) => i.url && i.binding);
}

/** The dialect ("1.0" | "0.3" | "toolnexus") and endpoint URL of a card fetched from `cardUrl`. */
export function endpointOf(card, cardUrl) {
  const list = interfaces(card);
  const jsonrpc = list.filter((i) => i.binding.toUpperCase() === "JSONRPC");
  const v1 = jsonrpc.find((i) => i.version?.startsWith("1"));
  if (v1) return { dialect: "1.0", endpoint: resolve(cardUrl, v1.url) };
  const marked03 = str(card.preferredTransport) !== undefined || list.length > 0;
  const url = str(card.url);
  if (url) return { dialect: marked03 ? "0.3" : "toolnexus", endpoint: resolve(cardUrl, url) };
  if (jsonrpc[0]) return { dialect: "0.3", endpoint: resolve(cardUrl, jsonrpc[0].url) };
  let origin = cardUrl;
  try {
    origin = new URL(cardUrl).origin;
  } catch {}
  return { dialect: "toolnexus", endpoint: `${origin}/` };
}

/**
 * What the UI shows of a card: `null` when `value` is not a card (the core's
 * rule: a JSON object with a string `name`).
 */
export function describeCard(value, cardUrl) {
  if (!value || typeof value !== "object" || Array.isArray(value) || typeof value.name !== "string") {
    return null;
  }
  const provider =
    value.provider && typeof value.provider === "object"
      ? { organization: str(value.provider.organization), url: str(value.provider.url) }
      : null;
  const skills = (Array.isArray(value.skills) ? value.skills : []).map((s) => ({
    id: str(s?.id) ?? str(s?.name) ?? "",
    name: str(s?.name) ?? str(s?.id) ?? "",
    description: str(s?.description) ?? "",
  }));
  return {
    name: value.name,
    description: str(value.description) ?? "",
    version: str(value.version) ?? "",
    protocolVersion: str(value.protocolVersion) ?? "",
    provider: provider && (provider.organization || provider.url) ? provider : null,
    skills,
    ...endpointOf(value, cardUrl),
  };
}
